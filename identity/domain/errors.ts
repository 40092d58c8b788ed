/**
 * The write side's named failures (README, "Users": UserAlreadyExists, InvalidEmail, EmailTaken) and the
 * order rules' refusals. Each is a PlatformError with a stable code, so an HTTP edge maps it to
 * problem+json unchanged; tests match on the class or the code.
 */
import { PlatformError } from '../../shared/errors.js';

export class UserAlreadyExists extends PlatformError {
  constructor(userId: string) {
    super('user_already_exists', { detail: `user ${userId} is already registered` });
    this.name = 'UserAlreadyExists';
  }
}

export class InvalidEmail extends PlatformError {
  constructor(field = 'email', why = 'is not a valid email address') {
    super('invalid_email', { field, detail: `${field}: ${why}` });
    this.name = 'InvalidEmail';
  }
}

export class EmailTaken extends PlatformError {
  constructor(field = 'email') {
    // The address itself is left out: the detail may be logged, and an address is personal data.
    super('email_taken', { field, detail: `${field}: the address belongs to another user` });
    this.name = 'EmailTaken';
  }
}

export class UserNotFound extends PlatformError {
  constructor(userId: string) {
    super('user_not_found', { detail: `no user ${userId}` });
    this.name = 'UserNotFound';
  }
}

/** Also the answer for a deleted order and for another customer's order: existence is not revealed. */
export class OrderNotFound extends PlatformError {
  constructor(orderId: string) {
    super('order_not_found', { detail: `no order ${orderId}` });
    this.name = 'OrderNotFound';
  }
}

/**
 * A place with an id that is taken. From a request this is only ever the caller's own order (ids
 * are minted per customer and idempotency key, identity/domain/order-id.ts), named in `order_id`
 * so a client whose first answer was lost can find it; `keyField` is the request field that
 * carried the key.
 */
export class OrderAlreadyExists extends PlatformError {
  readonly orderId: string;
  constructor(orderId: string, keyField?: string) {
    super('order_already_exists', {
      field: keyField ?? 'order_id',
      detail:
        keyField === undefined
          ? `order_id: order ${orderId} already exists`
          : `${keyField}: you already placed order ${orderId} with this key`,
      extra: { order_id: orderId },
    });
    this.name = 'OrderAlreadyExists';
    this.orderId = orderId;
  }
}

export class InvalidOrderTransition extends PlatformError {
  readonly from: string;
  readonly command: string;
  constructor(command: string, from: string, why?: string) {
    super('invalid_order_transition', {
      detail: why ?? `${command} is not allowed while the order is ${from}`,
      extra: { order_status: from },
    });
    this.name = 'InvalidOrderTransition';
    this.from = from;
    this.command = command;
  }
}

/** The caller's role does not carry the permission the command needs. */
export class NotPermitted extends PlatformError {
  constructor(detail: string) {
    super('forbidden', { detail });
    this.name = 'NotPermitted';
  }
}

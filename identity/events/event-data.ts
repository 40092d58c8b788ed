/**
 * The stored JSON of every domain event: the proto identity/v1 messages in their JSON mapping
 * (shared/proto-json.ts: snake_case names, epoch-second float timestamps, complete records). These
 * interfaces are what aggregates and projectors read; `encodeEvent` (codec.ts) checks every written
 * payload against the proto message, and the frozen fixtures test that the two agree.
 */

/** One line of an order (proto `OrderItem`). */
export interface OrderItemData {
  sku: string;
  quantity: number;
  /** Unit price. */
  price: number;
}

export interface UserRegisteredData {
  user_id: string;
  email: string;
  name: string;
  /** Epoch seconds. */
  created_at: number;
}

export interface UserEmailUpdatedData {
  user_id: string;
  old_email: string;
  new_email: string;
  reason: string;
  triggered_by: string;
  timestamp: number;
}

export interface UserProfilePicUpdatedData {
  user_id: string;
  pic_url: string;
}

export interface UserFollowedUserData {
  /** The follower. */
  user_id: string;
  followed_user_id: string;
}

export interface OrderPlacedData {
  order_id: string;
  customer_id: string;
  items: OrderItemData[];
  total: number;
  ts: number;
}

export interface PaymentProcessedData {
  order_id: string;
  amount: number;
  ts: number;
  card_last4: string;
  /** The payment provider's opaque token; never a card number. */
  card_token: string;
}

export interface InventoryReservedData {
  order_id: string;
  items: OrderItemData[];
  ts: number;
}

export interface OrderShippedData {
  order_id: string;
  tracking_number: string;
  ts: number;
}

export interface OrderDeliveredData {
  order_id: string;
  delivered_at: number;
  ts: number;
}

export interface OrderCancelledData {
  order_id: string;
  actor_id: string;
  reason: string;
  ts: number;
}

export interface OrderRefundedData {
  order_id: string;
  actor_id: string;
  amount: number;
  reason: string;
  ts: number;
}

export interface OrderModifiedData {
  order_id: string;
  actor_id: string;
  items: OrderItemData[];
  total: number;
  reason: string;
  ts: number;
}

export interface OrderDeletedData {
  order_id: string;
  actor_id: string;
  reason: string;
  ts: number;
}

export interface RefreshTokenReuseDetectedData {
  user_id: string;
  client_id: string;
  family_id: string;
  ts: number;
}

/** Event type → its payload. */
export interface EventDataMap {
  UserRegistered: UserRegisteredData;
  UserEmailUpdated: UserEmailUpdatedData;
  UserProfilePicUpdated: UserProfilePicUpdatedData;
  UserFollowedUser: UserFollowedUserData;
  OrderPlaced: OrderPlacedData;
  PaymentProcessed: PaymentProcessedData;
  InventoryReserved: InventoryReservedData;
  OrderShipped: OrderShippedData;
  OrderDelivered: OrderDeliveredData;
  OrderCancelled: OrderCancelledData;
  OrderRefunded: OrderRefundedData;
  OrderModified: OrderModifiedData;
  OrderDeleted: OrderDeletedData;
  RefreshTokenReuseDetected: RefreshTokenReuseDetectedData;
}

export type EventType = keyof EventDataMap;

/** A domain event before it is stored: its type and payload (current schema version). */
export type DomainEvent = { [K in EventType]: { readonly type: K; readonly data: EventDataMap[K] } }[EventType];

/** The domain event of one type. */
export type EventOf<K extends EventType> = Extract<DomainEvent, { type: K }>;

export type UserEvent = EventOf<
  'UserRegistered' | 'UserEmailUpdated' | 'UserProfilePicUpdated' | 'UserFollowedUser' | 'RefreshTokenReuseDetected'
>;

export type OrderEvent = EventOf<
  | 'OrderPlaced'
  | 'PaymentProcessed'
  | 'InventoryReserved'
  | 'OrderShipped'
  | 'OrderDelivered'
  | 'OrderCancelled'
  | 'OrderRefunded'
  | 'OrderModified'
  | 'OrderDeleted'
>;

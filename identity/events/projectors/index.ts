/** Every projector the identity service runs. */
import type { Projector } from '../projector.js';
import { orderSearchProjector } from './order-search.js';
import { orderTimelineProjector } from './order-timeline.js';
import { userCardProjector, userSearchProjector } from './user-docs.js';
import { warehouseQueueProjector } from './warehouse-queue.js';
import { welcomeNotificationProjector } from './welcome-notification.js';

export function identityProjectors(opts: { warehouseWindowMs: number }): Projector[] {
  return [
    orderSearchProjector,
    orderTimelineProjector,
    warehouseQueueProjector({ windowMs: opts.warehouseWindowMs }),
    userCardProjector,
    userSearchProjector,
    welcomeNotificationProjector,
  ];
}

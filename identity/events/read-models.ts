/**
 * Queries on the live read-model views. Everything here is eventually consistent: it shows the log
 * as of the projection lag (identity_projection_lag_seconds; milliseconds when healthy). A caller
 * that must see its own write reads the write model instead (the aggregate, via Orders/Users).
 */
import type pg from 'pg';
import { PlatformError } from '../../shared/errors.js';

export interface OrderSearchDoc {
  order_id: string;
  customer_id: string;
  status: string;
  /** When it was placed, epoch seconds. */
  date: number;
  total: number;
}

export interface TimelineEntry {
  stream_version: number;
  event_type: string;
  data: Record<string, unknown>;
  /** Epoch seconds. */
  recorded_at: number;
  event_id: string;
}

export interface WarehouseEntry {
  order_id: string;
  customer_id: string | null;
  items: unknown[];
  total: number | null;
  placed_at: number;
}

export interface UserCard {
  user_id: string;
  name: string | null;
  pic_url: string | null;
  follower_count: number;
  badge: string | null;
  updated_at: number;
}

export interface UserSearchDoc {
  user_id: string;
  name: string | null;
  bio: string | null;
  follower_count: number;
}

export class ReadModels {
  constructor(private readonly pool: pg.Pool) {}

  async order(orderId: string): Promise<OrderSearchDoc | undefined> {
    const rows = await this.q<OrderSearchDoc>('SELECT order_id, customer_id, status, date, total FROM order_search WHERE order_id = $1', [
      orderId,
    ]);
    return rows[0];
  }

  /** A customer's orders, newest first. */
  async ordersOf(customerId: string, limit = 50): Promise<OrderSearchDoc[]> {
    return this.q<OrderSearchDoc>(
      'SELECT order_id, customer_id, status, date, total FROM order_search WHERE customer_id = $1 ORDER BY date DESC, order_id LIMIT $2',
      [customerId, limit],
    );
  }

  /** Every event of the order, in order, including those before (and the) OrderDeleted. */
  async timeline(orderId: string): Promise<TimelineEntry[]> {
    return this.q<TimelineEntry>(
      'SELECT stream_version, event_type, data, recorded_at, event_id FROM order_timeline WHERE order_id = $1 ORDER BY stream_version',
      [orderId],
    );
  }

  /** Orders placed within `windowMs` before `nowMs` still waiting for the warehouse, oldest first. */
  async warehouseQueue(nowMs: number, windowMs: number): Promise<WarehouseEntry[]> {
    return this.q<WarehouseEntry>(
      'SELECT order_id, customer_id, items, total, placed_at FROM warehouse_queue WHERE placed_at >= $1 ORDER BY placed_at, order_id',
      [(nowMs - windowMs) / 1000],
    );
  }

  async userCard(userId: string): Promise<UserCard | undefined> {
    const rows = await this.q<UserCard>(
      'SELECT user_id, name, pic_url, follower_count, badge, updated_at FROM user_cards WHERE user_id = $1',
      [userId],
    );
    return rows[0];
  }

  /** Users whose name starts with `prefix` (any case), most followed first. */
  async searchUsers(prefix: string, limit = 20): Promise<UserSearchDoc[]> {
    const pattern = `${prefix.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    return this.q<UserSearchDoc>(
      'SELECT user_id, name, bio, follower_count FROM user_search WHERE lower(name) LIKE $1 ORDER BY follower_count DESC, user_id LIMIT $2',
      [pattern, limit],
    );
  }

  private async q<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> {
    try {
      return (await this.pool.query<R>(text, values)).rows;
    } catch (err) {
      // The views are created when the projectors first start; until then the model is not there.
      if ((err as { code?: string }).code === '42P01') {
        throw new PlatformError('unavailable', { detail: 'the read models are not initialised yet', cause: err });
      }
      throw err;
    }
  }
}

/**
 * Read models "user card" (user_id, name, pic_url, follower_count, badge, updated_at) and "user
 * search document" (user_id, name, bio, follower_count); README, "Read models and their staleness".
 * Two projectors from one factory: each keeps its own tables, so each can be rebuilt on its own.
 *
 * follower_count counts distinct followers: each projector keeps the follower edges, and only an
 * edge it has not seen before adds one, so a repeated UserFollowedUser changes nothing. Name and
 * picture are last-writer-wins by stream version. `badge` is derived from follower_count in the
 * view (a rule of ours): `rising` from 10 followers, `popular` from 100,
 * `star` from 1,000, none below. `bio` is in the search document because its field list has it, but no
 * event carries one yet: it stays null until one does. `updated_at` is when the last event that
 * changed the document was recorded, epoch seconds.
 */
import type { Queryable, RecordedEvent } from '../event-store.js';
import { entityId, str, type ProjectionContext, type Projector } from '../projector.js';

interface Delta {
  userId: string;
  registered: boolean;
  name: string | null;
  nameVersion: number;
  picUrl: string | null;
  picVersion: number;
  followers: number;
  updatedAt: number;
}

interface UserDocOptions {
  name: string;
  /** Base name of the document table and of the live view. */
  table: string;
  view: string;
  /** The card keeps the picture; the search document does not. */
  withPicture: boolean;
}

const BADGE = `CASE WHEN follower_count >= 1000 THEN 'star' WHEN follower_count >= 100 THEN 'popular'
            WHEN follower_count >= 10 THEN 'rising' END`;

function userDocProjector(o: UserDocOptions): Projector {
  const types = ['UserRegistered', 'UserFollowedUser', ...(o.withPicture ? ['UserProfilePicUpdated'] : [])];
  const edges = `${o.table}_followers`;
  return {
    name: o.name,
    version: 1,
    eventTypes: new Set(types),
    tables: [o.table, edges],

    async createTables(client: Queryable, ctx: ProjectionContext) {
      await client.query({
        text: `CREATE TABLE IF NOT EXISTS ${ctx.table(o.table)} (
  user_id        text    PRIMARY KEY,
  registered     boolean NOT NULL DEFAULT false,
  name           text,
  name_version   integer NOT NULL DEFAULT 0,
  pic_url        text,
  pic_version    integer NOT NULL DEFAULT 0,
  bio            text,
  follower_count integer NOT NULL DEFAULT 0,
  updated_at     float8  NOT NULL DEFAULT 0
)`,
      });
      await client.query({
        text: `CREATE TABLE IF NOT EXISTS ${ctx.table(edges)} (followed_id text NOT NULL, follower_id text NOT NULL, PRIMARY KEY (followed_id, follower_id))`,
      });
      if (!o.withPicture) {
        await client.query({
          text: `CREATE INDEX IF NOT EXISTS "${o.table}_g${ctx.generation}_name_idx" ON ${ctx.table(o.table)} (lower(name) text_pattern_ops)`,
        });
      }
    },

    views(ctx) {
      const t = ctx.table(o.table);
      const select = o.withPicture
        ? `SELECT user_id, name, pic_url, follower_count, ${BADGE} AS badge, updated_at FROM ${t} WHERE registered`
        : `SELECT user_id, name, bio, follower_count FROM ${t} WHERE registered`;
      return [{ name: o.view, select }];
    },

    async apply(client, events, ctx) {
      const deltas = new Map<string, Delta>();
      const delta = (userId: string): Delta => {
        let d = deltas.get(userId);
        if (!d) {
          d = { userId, registered: false, name: null, nameVersion: 0, picUrl: null, picVersion: 0, followers: 0, updatedAt: 0 };
          deltas.set(userId, d);
        }
        return d;
      };
      const follows: { followed: string; follower: string; at: number }[] = [];
      for (const e of events) foldEvent(e, delta, follows);

      if (follows.length > 0) {
        // Only edges new to this generation count; several in one batch are deduplicated first.
        const unique = new Map(follows.map((f) => [`${f.followed}\u0000${f.follower}`, f]));
        const list = [...unique.values()];
        const { rows } = await client.query<{ followed_id: string; follower_id: string }>({
          text: `INSERT INTO ${ctx.table(edges)} (followed_id, follower_id) SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT DO NOTHING RETURNING followed_id, follower_id`,
          values: [list.map((f) => f.followed), list.map((f) => f.follower)],
        });
        for (const r of rows) {
          const d = delta(r.followed_id);
          d.followers++;
          d.updatedAt = Math.max(d.updatedAt, unique.get(`${r.followed_id}\u0000${r.follower_id}`)?.at ?? 0);
        }
      }
      const list = [...deltas.values()].filter((d) => d.registered || d.name !== null || d.picUrl !== null || d.followers > 0);
      if (list.length === 0) return;
      await client.query({
        text: `INSERT INTO ${ctx.table(o.table)} AS u (user_id, registered, name, name_version, pic_url, pic_version, follower_count, updated_at)
SELECT * FROM unnest($1::text[], $2::bool[], $3::text[], $4::int[], $5::text[], $6::int[], $7::int[], $8::float8[])
ON CONFLICT (user_id) DO UPDATE SET
  registered     = u.registered OR EXCLUDED.registered,
  name           = CASE WHEN EXCLUDED.name_version > u.name_version THEN EXCLUDED.name ELSE u.name END,
  name_version   = GREATEST(u.name_version, EXCLUDED.name_version),
  pic_url        = CASE WHEN EXCLUDED.pic_version > u.pic_version THEN EXCLUDED.pic_url ELSE u.pic_url END,
  pic_version    = GREATEST(u.pic_version, EXCLUDED.pic_version),
  follower_count = u.follower_count + EXCLUDED.follower_count,
  updated_at     = GREATEST(u.updated_at, EXCLUDED.updated_at)`,
        values: [
          list.map((d) => d.userId),
          list.map((d) => d.registered),
          list.map((d) => d.name),
          list.map((d) => d.nameVersion),
          list.map((d) => d.picUrl),
          list.map((d) => d.picVersion),
          list.map((d) => d.followers),
          list.map((d) => d.updatedAt),
        ],
      });
    },
  };
}

function foldEvent(
  e: RecordedEvent,
  delta: (userId: string) => Delta,
  follows: { followed: string; follower: string; at: number }[],
): void {
  const at = e.recordedAt / 1000;
  const userId = entityId(e, 'user', 'user_id');
  switch (e.type) {
    case 'UserRegistered': {
      const d = delta(userId);
      d.registered = true;
      const name = str(e.data.name);
      if (name !== undefined && e.streamVersion > d.nameVersion) {
        d.name = name;
        d.nameVersion = e.streamVersion;
      }
      d.updatedAt = Math.max(d.updatedAt, at);
      break;
    }
    case 'UserProfilePicUpdated': {
      const d = delta(userId);
      const pic = str(e.data.pic_url);
      if (pic !== undefined && e.streamVersion > d.picVersion) {
        d.picUrl = pic;
        d.picVersion = e.streamVersion;
      }
      d.updatedAt = Math.max(d.updatedAt, at);
      break;
    }
    case 'UserFollowedUser': {
      const followed = str(e.data.followed_user_id);
      if (followed !== undefined && followed !== '' && followed !== userId) follows.push({ followed, follower: userId, at });
      break;
    }
  }
}

export const userCardProjector: Projector = userDocProjector({
  name: 'user_card',
  table: 'user_card',
  view: 'user_cards',
  withPicture: true,
});

export const userSearchProjector: Projector = userDocProjector({
  name: 'user_search',
  table: 'user_search',
  view: 'user_search',
  withPicture: false,
});

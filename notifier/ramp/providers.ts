/**
 * The providers of each channel and which one takes a delivery (README, "Replacing a provider").
 *
 * A channel has its old provider (FCM_URL, SMTP_URL, SMS_URL), optionally a new one being ramped in
 * (FCM_RAMP_URL, SMTP_RAMP_URL, SMS_RAMP_URL) and optionally a secondary (the `*_SECONDARY_URL`
 * failover). Per delivery:
 *
 * - the live provider is the new one for the share of deliveries its weight gives (choice.ts: a
 *   hash of the delivery id, so every attempt of a delivery and every replica agree);
 * - the other provider of the same channel is its secondary (retry-policy.ts's `secondary` step):
 *   the old provider for a delivery on the new one, whatever its tier; for a delivery on the old
 *   provider, the configured secondary, else the new provider while it takes live traffic;
 * - a share of the old provider's deliveries is also shadow-sent to the new provider: a push as an
 *   FCM dry run (`validate_only`, nothing reaches a device), an e-mail or SMS to a test recipient
 *   (NOTIFIER_RAMP_TEST_EMAILS, NOTIFIER_RAMP_TEST_PHONES), never to the user.
 *
 * The weights and shares are read from Postgres (store.ts) at start, on every NOTIFY of
 * `notifier_provider_ramp`, after the LISTEN connection (re)connects, and every
 * NOTIFIER_RAMP_POLL: the NOTIFY is a hint, the poll makes a missed one harmless.
 */
import type { Logger } from '../../shared/log.js';
import type { Channel, ChannelName, Tier } from '../channels/channel.js';
import { NO_RAMP, onNewProvider, shadowed, testRecipient, type RampSettings } from './choice.js';
import type { ProviderMeter } from './meter.js';
import { RAMP_CHANNELS, type RampChannel, type StoredRamp } from './store.js';

/** The channels as the worker holds them (notifier/channels/index.ts `ChannelSet`). */
export interface RampableChannels {
  readonly primary: Readonly<Partial<Record<ChannelName, Channel>>>;
  readonly secondary: Readonly<Partial<Record<ChannelName, Channel>>>;
  /** The new provider of a channel, when one is configured (FCM_RAMP_URL, SMTP_RAMP_URL, SMS_RAMP_URL). */
  readonly ramp?: Readonly<Partial<Record<ChannelName, Channel>>>;
}

/** Where a shadow copy goes. */
export interface ShadowPlan {
  channel: Channel;
  /** A push dry run (`validate_only`) to the user's device token. */
  dryRun: boolean;
  /** The test recipient of an e-mail or SMS copy; undefined for push (the user's token, dry run). */
  to?: string;
}

export interface ProviderRampOptions {
  channels: RampableChannels;
  load: () => Promise<Map<RampChannel, StoredRamp>>;
  /** Test recipients of e-mail and SMS shadow copies. */
  testRecipients: { email: readonly string[]; sms: readonly string[] };
  meter: ProviderMeter;
  /** How often the settings are reread without a NOTIFY, ms. */
  pollMs: number;
  log: Logger;
}

export class ProviderRamp {
  readonly #o: ProviderRampOptions;
  #settings = new Map<RampChannel, StoredRamp>();
  #timer: NodeJS.Timeout | undefined;
  #loading: Promise<void> | undefined;
  #again = false;

  constructor(opts: ProviderRampOptions) {
    this.#o = opts;
  }

  get meter(): ProviderMeter {
    return this.#o.meter;
  }

  /** Reads the settings, then rereads them every `pollMs`. A failed first read leaves everything on the old providers. */
  async start(): Promise<void> {
    await this.reload().catch((err: unknown) => this.#o.log.warn({ err }, 'provider ramp: reading the weights failed'));
    const tick = (): void => {
      this.#timer = setTimeout(() => {
        void this.reload()
          .catch((err: unknown) => this.#o.log.warn({ err }, 'provider ramp: rereading the weights failed'))
          .finally(() => {
            if (this.#timer !== undefined) tick();
          });
      }, this.#o.pollMs);
      this.#timer.unref();
    };
    tick();
  }

  close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Rereads the settings (a NOTIFY, a reconnect, the poll). Calls during a read make one more read after it. */
  reload(): Promise<void> {
    if (this.#loading) {
      this.#again = true;
      return this.#loading;
    }
    const run = async (): Promise<void> => {
      try {
        do {
          this.#again = false;
          this.#settings = await this.#o.load();
        } while (this.#again);
      } finally {
        this.#loading = undefined;
      }
    };
    this.#loading = run();
    return this.#loading;
  }

  /** The stored settings of a channel (weights and shadow share in hundredths of a percent). */
  settings(channel: RampChannel): StoredRamp {
    return this.#settings.get(channel) ?? { ...NO_RAMP, updatedBy: null, updatedAt: null };
  }

  #ramp(channel: ChannelName): RampSettings {
    return isRampChannel(channel) ? this.settings(channel) : NO_RAMP;
  }

  /** The old provider of a channel. */
  old(channel: ChannelName): Channel | undefined {
    return this.#o.channels.primary[channel];
  }

  /** The new provider of a channel, when one is configured. */
  new(channel: ChannelName): Channel | undefined {
    return this.#o.channels.ramp?.[channel];
  }

  /** The configured secondary of a channel (`*_SECONDARY_URL`). */
  secondary(channel: ChannelName): Channel | undefined {
    return this.#o.channels.secondary[channel];
  }

  /** The provider that takes this delivery's live sends. */
  live(channel: ChannelName, deliveryId: string): Channel | undefined {
    const next = this.new(channel);
    if (next && onNewProvider(deliveryId, this.#ramp(channel))) return next;
    return this.old(channel);
  }

  /** Is `provider` the new provider of its channel? */
  isNew(channel: ChannelName, provider: Channel): boolean {
    return provider === this.new(channel);
  }

  /** The other provider of the same channel, tried once when `live` has failed (see the module comment). */
  alternate(channel: ChannelName, live: Channel | undefined): Channel | undefined {
    const next = this.new(channel);
    if (live !== undefined && live === next) return this.old(channel);
    const secondary = this.secondary(channel);
    if (secondary) return secondary;
    return next && this.#ramp(channel).weight > 0 ? next : undefined;
  }

  /**
   * The shadow copy of a delivery sent with the old provider, if it has one: a share of the
   * deliveries (the shadow share), on their first attempt. Transactional e-mail and SMS carry
   * codes and links meant for one person: their content never goes to a test recipient.
   */
  shadow(channel: ChannelName, deliveryId: string, tier: Tier): ShadowPlan | undefined {
    const next = this.new(channel);
    if (!next || !isRampChannel(channel) || !shadowed(deliveryId, this.settings(channel))) return undefined;
    if (channel === 'push') return { channel: next, dryRun: true };
    if (tier === 'transactional') return undefined;
    const to = testRecipient(deliveryId, this.#o.testRecipients[channel]);
    return to === undefined ? undefined : { channel: next, dryRun: false, to };
  }

  /** Can a shadow share be set on this channel (push always; e-mail and SMS need test recipients)? */
  canShadow(channel: RampChannel): boolean {
    return channel === 'push' || this.#o.testRecipients[channel].length > 0;
  }
}

export function isRampChannel(c: string): c is RampChannel {
  return (RAMP_CHANNELS as readonly string[]).includes(c);
}

/**
 * A minimal SMTP server (RFC 5321) for the sandbox: enough for nodemailer and for `swaks`-style
 * manual tests. Commands: EHLO/HELO, MAIL FROM, RCPT TO, DATA, RSET, NOOP, QUIT, VRFY (252), and
 * AUTH PLAIN/LOGIN (any credentials are accepted). No STARTTLS (answered 502, and not advertised),
 * no PIPELINING, no BDAT/CHUNKING, no DSN. Lines are processed one at a time, in order, so a slow
 * answer to DATA holds the next command as a real server would.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { Logger } from '../../shared/log.js';

/** An SMTP reply: code and text (multi-line text is split on `\n`). */
export interface SmtpReply {
  code: number;
  text: string;
  /** Close the connection after this reply (421). */
  close?: boolean;
}

export interface SmtpHooks {
  /** Decides on one RCPT TO; `undefined` accepts it. */
  recipient(address: string): SmtpReply | undefined;
  /** Handles a complete message (may wait: that is how latency and timeouts are injected). */
  message(envelope: { from: string; to: string[] }, data: Buffer): Promise<SmtpReply>;
}

export interface SmtpServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  hooks: SmtpHooks;
  log: Logger;
  /** Largest message accepted (SIZE), bytes. */
  maxBytes?: number;
  /** The name in the greeting. */
  hostname?: string;
}

export interface SmtpServer {
  readonly port: number;
  /** Stops accepting, and destroys open connections. */
  close(): Promise<void>;
}

const DEFAULT_MAX = 10 * 1024 * 1024;

export async function startSmtpServer(opts: SmtpServerOptions): Promise<SmtpServer> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    new SmtpSession(socket, opts).start();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : opts.port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}

type Mode = 'command' | 'data' | 'auth-plain' | 'auth-login-user' | 'auth-login-pass';

class SmtpSession {
  readonly #socket: Socket;
  readonly #opts: SmtpServerOptions;
  readonly #max: number;
  #buffer = '';
  #lines: string[] = [];
  #busy = false;
  #mode: Mode = 'command';
  #greeted = false;
  #from: string | undefined;
  #to: string[] = [];
  #data: string[] = [];
  #dataBytes = 0;
  #closed = false;

  constructor(socket: Socket, opts: SmtpServerOptions) {
    this.#socket = socket;
    this.#opts = opts;
    this.#max = opts.maxBytes ?? DEFAULT_MAX;
  }

  start(): void {
    // latin1 keeps every byte of an 8-bit message as one character; the body is turned back into
    // bytes when it is complete.
    this.#socket.setEncoding('latin1');
    this.#socket.on('data', (chunk: string) => this.#onData(chunk));
    this.#socket.on('error', () => {});
    this.#socket.on('close', () => (this.#closed = true));
    this.#reply({ code: 220, text: `${this.#opts.hostname ?? 'sandbox'} ESMTP sandbox ready` });
  }

  #onData(chunk: string): void {
    this.#buffer += chunk;
    let i: number;
    while ((i = this.#buffer.indexOf('\n')) >= 0) {
      this.#lines.push(this.#buffer.slice(0, i).replace(/\r$/, ''));
      this.#buffer = this.#buffer.slice(i + 1);
    }
    if (this.#buffer.length > 64 * 1024 && this.#mode !== 'data') {
      this.#reply({ code: 500, text: '5.5.6 Line too long', close: true });
      return;
    }
    void this.#drain();
  }

  async #drain(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      while (this.#lines.length > 0 && !this.#closed) await this.#line(this.#lines.shift()!);
    } catch (err) {
      this.#opts.log.error({ err }, 'smtp session failed');
      this.#reply({ code: 451, text: '4.3.0 Local error in processing', close: true });
    } finally {
      this.#busy = false;
    }
  }

  async #line(line: string): Promise<void> {
    switch (this.#mode) {
      case 'data':
        return this.#dataLine(line);
      case 'auth-plain':
      case 'auth-login-pass':
        this.#mode = 'command';
        return this.#reply({ code: 235, text: '2.7.0 Authentication successful' });
      case 'auth-login-user':
        this.#mode = 'auth-login-pass';
        return this.#reply({ code: 334, text: 'UGFzc3dvcmQ6' });
      case 'command':
        return this.#command(line);
    }
  }

  #command(line: string): void {
    const m = /^([A-Za-z]+)(?:\s+(.*))?$/.exec(line.trim());
    const verb = m?.[1]?.toUpperCase() ?? '';
    const arg = m?.[2] ?? '';
    switch (verb) {
      case 'EHLO':
        this.#greeted = true;
        this.#reset();
        return this.#reply({
          code: 250,
          text: [this.#opts.hostname ?? 'sandbox', `SIZE ${this.#max}`, '8BITMIME', 'SMTPUTF8', 'AUTH PLAIN LOGIN'].join('\n'),
        });
      case 'HELO':
        this.#greeted = true;
        this.#reset();
        return this.#reply({ code: 250, text: this.#opts.hostname ?? 'sandbox' });
      case 'MAIL': {
        if (!this.#greeted) return this.#reply({ code: 503, text: '5.5.1 Send EHLO or HELO first' });
        const a = /^FROM:\s*<([^>]*)>/i.exec(arg);
        if (!a) return this.#reply({ code: 501, text: '5.5.4 Syntax: MAIL FROM:<address>' });
        this.#reset();
        this.#from = a[1]!;
        return this.#reply({ code: 250, text: '2.1.0 Ok' });
      }
      case 'RCPT': {
        if (this.#from === undefined) return this.#reply({ code: 503, text: '5.5.1 Need MAIL FROM first' });
        const a = /^TO:\s*<([^>]+)>/i.exec(arg);
        if (!a) return this.#reply({ code: 501, text: '5.5.4 Syntax: RCPT TO:<address>' });
        const refused = this.#opts.hooks.recipient(a[1]!);
        if (refused) return this.#reply(refused);
        this.#to.push(a[1]!);
        return this.#reply({ code: 250, text: '2.1.5 Ok' });
      }
      case 'DATA':
        if (this.#to.length === 0) return this.#reply({ code: 503, text: '5.5.1 Need RCPT TO first' });
        this.#mode = 'data';
        this.#data = [];
        this.#dataBytes = 0;
        return this.#reply({ code: 354, text: 'End data with <CR><LF>.<CR><LF>' });
      case 'RSET':
        this.#reset();
        return this.#reply({ code: 250, text: '2.0.0 Ok' });
      case 'NOOP':
        return this.#reply({ code: 250, text: '2.0.0 Ok' });
      case 'VRFY':
        return this.#reply({ code: 252, text: '2.5.2 Cannot VRFY user, but will accept message' });
      case 'QUIT':
        return this.#reply({ code: 221, text: '2.0.0 Bye', close: true });
      case 'AUTH': {
        const [mech, initial] = arg.split(/\s+/);
        if (mech?.toUpperCase() === 'PLAIN') {
          if (initial) return this.#reply({ code: 235, text: '2.7.0 Authentication successful' });
          this.#mode = 'auth-plain';
          return this.#reply({ code: 334, text: '' });
        }
        if (mech?.toUpperCase() === 'LOGIN') {
          if (initial) {
            this.#mode = 'auth-login-pass';
            return this.#reply({ code: 334, text: 'UGFzc3dvcmQ6' });
          }
          this.#mode = 'auth-login-user';
          return this.#reply({ code: 334, text: 'VXNlcm5hbWU6' });
        }
        return this.#reply({ code: 504, text: '5.5.4 Unrecognized authentication type' });
      }
      case 'STARTTLS':
        return this.#reply({ code: 502, text: '5.5.1 STARTTLS is not supported by the sandbox' });
      default:
        return this.#reply({ code: 502, text: '5.5.2 Command not recognized' });
    }
  }

  async #dataLine(line: string): Promise<void> {
    if (line !== '.') {
      // Dot-stuffing (RFC 5321 §4.5.2): a leading dot was doubled by the client.
      const l = line.startsWith('.') ? line.slice(1) : line;
      this.#dataBytes += l.length + 2;
      if (this.#dataBytes <= this.#max) this.#data.push(l);
      return;
    }
    this.#mode = 'command';
    const envelope = { from: this.#from ?? '', to: this.#to };
    const tooBig = this.#dataBytes > this.#max;
    const data = Buffer.from(this.#data.join('\r\n') + '\r\n', 'latin1');
    this.#reset();
    if (tooBig) return this.#reply({ code: 552, text: '5.3.4 Message size exceeds fixed limit' });
    this.#reply(await this.#opts.hooks.message(envelope, data));
  }

  #reset(): void {
    this.#from = undefined;
    this.#to = [];
    this.#data = [];
    this.#dataBytes = 0;
  }

  #reply(r: SmtpReply): void {
    if (this.#closed) return;
    const lines = r.text.split('\n');
    const out = lines.map((l, i) => `${r.code}${i < lines.length - 1 ? '-' : ' '}${l}`).join('\r\n') + '\r\n';
    if (r.close) {
      this.#closed = true;
      this.#socket.end(out);
    } else {
      this.#socket.write(out);
    }
  }
}

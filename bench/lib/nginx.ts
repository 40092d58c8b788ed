/**
 * The peer: nginx with `limit_req` and `proxy_pass`, one worker process (or `--workers`), in front of the same
 * upstream. The bench writes its own config into bench/.scratch (127.0.0.1 only, its own pid,
 * error log and temp paths, access log off), runs nginx in the foreground as a child, and stops it.
 *
 * Two servers in the one worker: `admit` with a rate no run can reach, `deny` with 1 request per
 * minute (burst 1), so nearly every request is refused with 429 — like the sidecar's two quotas.
 * Both key on the API key header, as the sidecar does, and forward X-Forwarded-For/-Proto as it
 * does; upstream connections are kept alive, and neither side caps requests per connection.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { spawnPinned, waitForPort, type Started } from './processes.js';

export interface NginxPorts {
  admit: number;
  deny: number;
  upstream: number;
  /** worker_processes (bench/sidecar.ts `--workers`); 1 when omitted. */
  workers?: number;
}

/** The nginx.conf text for these ports, with every path under `dir`. */
export function nginxConfig(dir: string, ports: NginxPorts): string {
  const server = (port: number, zone: string, burst: number): string => `
    server {
        listen 127.0.0.1:${port};
        location / {
            limit_req zone=${zone} burst=${burst} nodelay;
            proxy_pass http://bench_upstream;
        }
    }`;
  return `# Written by bench/sidecar.ts; rewritten on every run.
worker_processes ${ports.workers ?? 1};
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'nginx.error.log')} warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path ${join(dir, 'nginx-tmp', 'body')};
    proxy_temp_path ${join(dir, 'nginx-tmp', 'proxy')};
    fastcgi_temp_path ${join(dir, 'nginx-tmp', 'fastcgi')};
    uwsgi_temp_path ${join(dir, 'nginx-tmp', 'uwsgi')};
    scgi_temp_path ${join(dir, 'nginx-tmp', 'scgi')};
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    limit_req_status 429;
    # Refusals log at info, below error_log's warn: a log line per denied request would measure the disk.
    limit_req_log_level info;
    limit_req_zone $http_x_api_key zone=admit:10m rate=100000000r/s;
    limit_req_zone $http_x_api_key zone=deny:10m rate=1r/m;
    upstream bench_upstream {
        server 127.0.0.1:${ports.upstream};
        keepalive 128;
        keepalive_requests 100000000;
    }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_set_header Host $host;
    proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_buffering on;
${server(ports.admit, 'admit', 100000000)}
${server(ports.deny, 'deny', 1)}
}
`;
}

/** `nginx/1.22.1`, or undefined when not installed. */
export function nginxVersion(bin: string): string | undefined {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  return r.status === 0 ? (r.stderr || r.stdout).trim().replace(/^nginx version:\s*/, '') : undefined;
}

/** Writes the config, checks it with `nginx -t`, starts nginx pinned to `cpu`, waits for both ports. */
export async function startNginx(bin: string, dir: string, ports: NginxPorts, cpu: string | undefined): Promise<Started> {
  mkdirSync(join(dir, 'nginx-tmp'), { recursive: true });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, nginxConfig(dir, ports));
  // -p and -e keep nginx from touching /var/log/nginx or its compiled-in prefix at all.
  const base = ['-p', dir, '-e', join(dir, 'nginx.error.log'), '-c', conf];
  const check = spawnSync(bin, [...base, '-t', '-q'], { encoding: 'utf8' });
  if (check.status !== 0) throw new Error(`nginx -t rejected ${conf}:\n${check.stderr}`);
  const log = join(dir, 'nginx.out.log');
  const p = spawnPinned('nginx', bin, base, { cpu, logFile: log });
  await waitForPort(p, ports.admit, log);
  await waitForPort(p, ports.deny, log);
  return p;
}

/** The contract files under test, and a registry to find their messages by type name. */
import { createRegistry } from '@bufbuild/protobuf';
import type { DescMessage } from '@bufbuild/protobuf';
import { file_identity_v1_identity } from '../../proto/gen/identity/v1/identity_pb.js';
import { file_notify_v1_notify } from '../../proto/gen/notify/v1/notify_pb.js';
import { file_quota_v1_quota } from '../../proto/gen/quota/v1/quota_pb.js';

export const contractFiles = [file_quota_v1_quota, file_notify_v1_notify, file_identity_v1_identity] as const;

export const registry = createRegistry(...contractFiles);

export function messageByName(typeName: string): DescMessage {
  const desc = registry.getMessage(typeName);
  if (desc === undefined) throw new Error(`no message ${typeName} in the contracts`);
  return desc;
}

/**
 * Reads a fetched JSON document with a size bound, for the documents the verifier polls (the JWKS,
 * identity's revocation list): a declared Content-Length over the bound is refused before a byte
 * is read, a body that grows past it is cut off, and the ETag is kept for the next conditional
 * request (a weak one is fine for If-None-Match, RFC 9110 §13.1.2; one over 256 bytes is ignored).
 */
export async function readBoundedJson(res: Response, maxBytes: number, what: string): Promise<{ doc: unknown; etag: string | undefined }> {
  if (Number(res.headers.get('content-length') ?? 0) > maxBytes) {
    await res.body?.cancel();
    throw new Error(`${what} is larger than ${maxBytes} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body) {
      size += chunk.byteLength;
      if (size > maxBytes) throw new Error(`${what} is larger than ${maxBytes} bytes`);
      chunks.push(chunk);
    }
  }
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Error(`${what} is not valid JSON`);
  }
  const etag = res.headers.get('etag') ?? undefined;
  return { doc, etag: etag !== undefined && etag.length <= 256 ? etag : undefined };
}

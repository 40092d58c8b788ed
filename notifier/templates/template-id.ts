/**
 * Template ids are versioned in the id itself (README, "Templates"): `<name>_v<N>`, e.g. `order_shipped_v2`.
 * The name is lower-case ASCII letters, digits, `_` and `-`, starting with a letter; the version a
 * positive integer without leading zeros. No dots: a dot separates a template id from a locale in
 * a variant id, `<template_id>.<locale>` (`order_shipped_v2.fr_CA`).
 */
import { canonicalLocale } from './locale.js';

export const TEMPLATE_ID_MAX_LENGTH = 128;
const TEMPLATE_ID_RE = /^([a-z][a-z0-9_-]*)_v([1-9][0-9]{0,8})$/;

export interface TemplateId {
  readonly id: string;
  readonly name: string;
  readonly version: number;
}

/** Splits `<name>_v<N>`; undefined when `input` is not a template id. */
export function parseTemplateId(input: string): TemplateId | undefined {
  if (input.length > TEMPLATE_ID_MAX_LENGTH) return undefined;
  const m = TEMPLATE_ID_RE.exec(input);
  if (!m) return undefined;
  return { id: input, name: m[1]!, version: Number(m[2]) };
}

/** Splits a variant id `<template_id>.<locale>` (locale canonicalised); undefined when it is not one. */
export function parseVariantId(input: string): { template: TemplateId; locale: string } | undefined {
  const dot = input.lastIndexOf('.');
  if (dot < 0) return undefined;
  const template = parseTemplateId(input.slice(0, dot));
  const locale = canonicalLocale(input.slice(dot + 1));
  return template && locale ? { template, locale } : undefined;
}

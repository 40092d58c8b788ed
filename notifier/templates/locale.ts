/**
 * Locales of template variants and user profiles: a language (`en`) or a language and region
 * (`en_US`), written canonically with an underscore, the language lower-case and the region
 * upper-case. `en-us`, `EN_us` and `en_US` are the same locale. Scripts and other subtags
 * (`zh-Hant-TW`) are not supported: variant ids are `<template_id>.<locale>` with `xx_YY` (README,
 * "Templates").
 */

const LOCALE_RE = /^([A-Za-z]{2,3})(?:[_-]([A-Za-z]{2}|[0-9]{3}))?$/;

/** The canonical form of a locale (`en`, `en_US`, `es_419`), or undefined when it is not one. */
export function canonicalLocale(input: string): string | undefined {
  const m = LOCALE_RE.exec(input);
  if (!m) return undefined;
  const lang = m[1]!.toLowerCase();
  return m[2] === undefined ? lang : `${lang}_${m[2].toUpperCase()}`;
}

/**
 * The variants to try, in order, for a requested locale: `xx_YY`, then `xx`, then the template's
 * default. A request without a locale (or with one that is not a locale) gets the default only.
 * Only these: `pt` does not fall to `pt_BR`, and `en_GB` does not fall to `en_US`.
 */
export function localeChain(requested: string | undefined, defaultLocale: string): string[] {
  const chain: string[] = [];
  const want = requested === undefined ? undefined : canonicalLocale(requested);
  if (want !== undefined) {
    chain.push(want);
    const sep = want.indexOf('_');
    if (sep > 0) chain.push(want.slice(0, sep));
  }
  if (!chain.includes(defaultLocale)) chain.push(defaultLocale);
  return chain;
}

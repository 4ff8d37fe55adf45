// Stand-in for the `entities` package, bundled instead of it: markdown-it only calls
// decodeHTMLStrict, with one named reference ("&copy;"), and the page already knows every HTML
// entity. A detached <textarea> decodes it: its content is text (RCDATA), never markup, and the
// name is letters and digits only (markdown-it's pattern). Saves ~24 KB of each bundle.
const cache = new Map();
let area = null;

export function decodeHTMLStrict(ref) {
  let out = cache.get(ref);
  if (out !== undefined) return out;
  out = ref;
  if (/^&[a-z][a-z0-9]{1,31};$/i.test(ref)) {
    const doc = globalThis.document;
    if (doc) {
      area = area || doc.createElement("textarea");
      area.innerHTML = ref;
      // a whole reference decodes to one or two characters; the parser also decodes a legacy
      // prefix ("&notin;" is whole, "&notanentity;" only its "&not"): that is no reference
      const value = area.value;
      if ([...value].length <= 2) out = value;
    }
  }
  if (cache.size < 512) cache.set(ref, out);
  return out;
}

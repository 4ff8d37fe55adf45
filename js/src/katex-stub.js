// Stand-in for KaTeX in the widget bundles: markdown-it-texmath loads "katex" (CommonJS) when it is given
// no engine, and math.js always gives it one (its renderer rules draw every formula, through the
// lazily loaded katex.js), so this is never called. It keeps KaTeX itself out of the bundles.
export default {
  renderToString() {
    return "";
  },
};

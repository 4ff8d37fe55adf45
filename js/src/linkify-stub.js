// Stand-in for linkify-it, bundled instead of the real one: the renderer runs markdown-it with
// linkify: false, so markdown-it never calls it (saves ~12 KB of the bundle).
export class LinkifyIt {
  test() {
    return false;
  }
  pretest() {
    return false;
  }
  match() {
    return null;
  }
  matchAtStart() {
    return null;
  }
  set() {
    return this;
  }
  add() {
    return this;
  }
  tlds() {
    return this;
  }
}
export default LinkifyIt;

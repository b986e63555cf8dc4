// @ts-check
// On narrow screens the sidebar is a drawer: a toggle opens it; a tap outside, Esc or a choice made in it
// (a conversation, a file, "New conversation") closes it. On wide screens it is always there.
const NARROW = "(max-width: 760px)";
const CLOSES_DRAWER = '.conv-item, #new-conversation, .tree-entry[data-type="file"], .sidebar-foot a';

export class Drawer {
  constructor({ sidebar, toggle, backdrop }) {
    this.sidebar = sidebar;
    this.toggle = toggle;
    this.backdrop = backdrop;
    this.media = window.matchMedia(NARROW);
    this.open = false;
    toggle.addEventListener("click", () => this.setOpen(!this.open));
    backdrop.addEventListener("click", () => this.setOpen(false));
    sidebar.addEventListener("click", (event) => {
      if (event.target.closest(CLOSES_DRAWER)) this.setOpen(false);
    });
    // Capture: Esc closes the drawer before anything else (stopping a task) sees it.
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || !this.open) return;
      event.preventDefault();
      event.stopPropagation();
      this.setOpen(false);
      this.toggle.focus();
    }, { capture: true });
    this.media.addEventListener("change", () => this.setOpen(false));
    this.setOpen(false);
  }

  setOpen(open) {
    const narrow = this.media.matches;
    this.open = open && narrow;
    document.body.classList.toggle("drawer-open", this.open);
    this.toggle.setAttribute("aria-expanded", String(this.open));
    this.backdrop.hidden = !this.open;
    this.sidebar.inert = narrow && !this.open; // off screen: out of the tab order too
    if (this.open) (this.sidebar.querySelector('.conv-item[aria-current="true"]') ?? this.sidebar.querySelector("#new-conversation"))?.focus();
  }
}

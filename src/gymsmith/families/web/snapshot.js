// The observation: a text rendering of the page in which every visible interactive element carries a
// numbered id (data-gsid), assigned in document order, so the same page always gets the same ids.
() => {
  const INTERACTIVE = new Set(["A", "BUTTON", "INPUT", "SELECT", "TEXTAREA"]);
  const BLOCK = new Set(["P", "DIV", "H1", "H2", "H3", "H4", "LI", "TR", "FORM", "TABLE", "SECTION", "NAV", "HEADER", "MAIN", "UL", "OL", "BR"]);
  const elements = [];
  const lines = [];
  let line = [];
  const flush = () => { if (line.length) { lines.push(line.join(" ").replace(/\s+/g, " ").trim()); line = []; } };
  const labelOf = (el) => {
    if (el.getAttribute("aria-label")) return el.getAttribute("aria-label");
    if (el.id) { const l = document.querySelector(`label[for="${el.id}"]`); if (l) return l.innerText.trim(); }
    if (el.tagName === "INPUT" && (el.type === "submit" || el.type === "button")) return el.value;
    return (el.innerText || el.placeholder || el.name || "").trim();
  };
  const roleOf = (el) => {
    if (el.tagName === "A") return "link";
    if (el.tagName === "BUTTON") return "button";
    if (el.tagName === "SELECT") return "select";
    if (el.tagName === "TEXTAREA") return "textbox";
    const t = (el.type || "text").toLowerCase();
    if (t === "submit" || t === "button") return "button";
    if (t === "checkbox" || t === "radio") return t;
    return "textbox";
  };
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { const t = node.textContent.trim(); if (t) line.push(t); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    if (["SCRIPT", "STYLE", "NOSCRIPT", "LABEL", "IMG"].includes(el.tagName) || el.hidden) return;
    if (el.tagName === "INPUT" && el.type === "hidden") return;
    if (INTERACTIVE.has(el.tagName)) {
      if (el.checkVisibility && !el.checkVisibility({ visibilityProperty: true })) return;  // what a person cannot see gets no id
      const id = elements.length + 1;
      el.setAttribute("data-gsid", String(id));
      const role = roleOf(el);
      const info = { id, role, label: labelOf(el), name: el.getAttribute("name") || "" };
      let token = `[${id}] ${role} "${info.label}"`;
      if (role === "textbox") { info.value = el.value; token += el.type === "password" ? (el.value ? ' value="••••"' : ' value=""') : ` value="${el.value}"`; }
      if (role === "select") {
        info.options = Array.from(el.options).map((o) => o.text.trim());
        info.value = el.selectedIndex >= 0 ? el.options[el.selectedIndex].text.trim() : "";
        token += ` selected="${info.value}" options=[${info.options.map((o) => `"${o}"`).join(", ")}]`;
      }
      if (role === "link") info.href = el.getAttribute("href") || "";
      elements.push(info);
      line.push(token);
      return;
    }
    const block = BLOCK.has(el.tagName);
    if (block) flush();
    if (el.tagName === "TD" || el.tagName === "TH") line.push("|");
    for (const child of el.childNodes) walk(child);
    if (block) flush();
  };
  walk(document.body);
  flush();
  return { text: lines.filter((l) => l).join("\n"), elements, title: document.title };
}

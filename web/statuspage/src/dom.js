// The page's two DOM helpers, shared by the status view (main.js) and the feed view
// (feed.js).

export const $ = (sel) => document.querySelector(sel);

// el makes an element: props are its properties ('class' the class name, 'data' its
// dataset), children nodes or text.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'data') for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = dv;
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// A tiny, safe markdown renderer: HTML is escaped first, then a few constructs are added
// (fenced and inline code, headings, bold, italics, lists, http(s) links, paragraphs).
"use strict";
(function () {
  function escapeHtml(text) {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;").replace(/'/g, "&#39;");
  }
  function inline(text) {
    const codes = [];
    text = text.replace(/`([^`]+)`/g, function (_, code) {
      codes.push(code);
      return "\u0000" + (codes.length - 1) + "\u0000";
    });
    text = text
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
      .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g,
        '<a href="$2" target="_blank" rel="noopener noreferrer">$1</a>');
    return text.replace(/\u0000(\d+)\u0000/g, function (_, i) { return "<code>" + codes[+i] + "</code>"; });
  }
  function renderBlocks(text) {
    const out = [];
    let list = null;
    let para = [];
    function flush() {
      if (para.length) { out.push("<p>" + inline(para.join("<br>")) + "</p>"); para = []; }
      if (list) { out.push("<" + list.tag + ">" + list.items.map(function (i) { return "<li>" + inline(i) + "</li>"; }).join("") + "</" + list.tag + ">"); list = null; }
    }
    text.split("\n").forEach(function (line) {
      const heading = /^(#{1,4})\s+(.*)$/.exec(line);
      const bullet = /^\s*[-*]\s+(.*)$/.exec(line);
      const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
      if (heading) { flush(); const n = heading[1].length + 1; out.push("<h" + n + ">" + inline(heading[2]) + "</h" + n + ">"); }
      else if (bullet || numbered) {
        const tag = bullet ? "ul" : "ol";
        if (para.length || (list && list.tag !== tag)) flush();
        if (!list) list = { tag: tag, items: [] };
        list.items.push((bullet || numbered)[1]);
      }
      else if (!line.trim()) flush();
      else { if (list) flush(); para.push(line); }
    });
    flush();
    return out.join("");
  }
  function render(source) {
    const parts = escapeHtml(source || "").split(/```/);
    return parts.map(function (part, i) {
      if (i % 2 === 1) {
        const body = part.replace(/^[\w+-]*\n/, "");
        return "<pre><code>" + body + "</code></pre>";
      }
      return renderBlocks(part);
    }).join("");
  }
  window.renderMarkdown = render;
  window.escapeHtml = escapeHtml;
})();

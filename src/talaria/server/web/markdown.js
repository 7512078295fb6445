// A tiny, safe markdown renderer: HTML is escaped first, then a few constructs are added
// (fenced and inline code, headings, bold, italics, lists, quotes, tables, http(s) links,
// paragraphs).
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

  // A table row "| a | b |" (outer pipes optional) as its cells; null for a line without a pipe.
  function cells(line) {
    if (line.indexOf("|") < 0) return null;
    return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map(function (c) { return c.trim(); });
  }
  const SEPARATOR = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

  function table(head, rows) {
    const th = head.map(function (c) { return "<th>" + inline(c) + "</th>"; }).join("");
    const body = rows.map(function (row) {
      return "<tr>" + head.map(function (_, i) { return "<td>" + inline(row[i] || "") + "</td>"; }).join("") + "</tr>";
    }).join("");
    return '<div class="table"><table><thead><tr>' + th + "</tr></thead><tbody>" + body + "</tbody></table></div>";
  }

  function renderBlocks(text) {
    const out = [];
    const lines = text.split("\n");
    let list = null;
    let para = [];
    let quote = [];
    function flush() {
      if (para.length) { out.push("<p>" + inline(para.join("<br>")) + "</p>"); para = []; }
      if (list) { out.push("<" + list.tag + ">" + list.items.map(function (i) { return "<li>" + inline(i) + "</li>"; }).join("") + "</" + list.tag + ">"); list = null; }
      if (quote.length) { out.push("<blockquote>" + renderBlocks(quote.join("\n")) + "</blockquote>"); quote = []; }
    }
    for (let n = 0; n < lines.length; n++) {
      const line = lines[n];
      const quoted = /^\s*&gt;\s?(.*)$/.exec(line);  // ">" was escaped before this runs
      if (quoted) { if (!quote.length) flush(); quote.push(quoted[1]); continue; }
      if (quote.length) flush();
      const head = cells(line);
      if (head && n + 1 < lines.length && SEPARATOR.test(lines[n + 1])) {
        flush();
        const rows = [];
        n += 2;
        while (n < lines.length && cells(lines[n]) && lines[n].trim()) { rows.push(cells(lines[n])); n++; }
        n--;
        out.push(table(head, rows));
        continue;
      }
      const heading = /^(#{1,4})\s+(.*)$/.exec(line);
      const bullet = /^\s*[-*]\s+(.*)$/.exec(line);
      const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
      if (heading) { flush(); const h = heading[1].length + 1; out.push("<h" + h + ">" + inline(heading[2]) + "</h" + h + ">"); }
      else if (bullet || numbered) {
        const tag = bullet ? "ul" : "ol";
        if (para.length || (list && list.tag !== tag)) flush();
        if (!list) list = { tag: tag, items: [] };
        list.items.push((bullet || numbered)[1]);
      }
      else if (!line.trim()) flush();
      else { if (list) flush(); para.push(line); }
    }
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

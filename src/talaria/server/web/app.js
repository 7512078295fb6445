// The web chat: sessions on the side, one run at a time, its events over EventSource.
// Same-origin requests carry the key cookie set by /?key=... (see the README).
"use strict";
(function () {
  const $ = function (id) { return document.getElementById(id); };
  const transcript = $("transcript");
  const state = { session: null, run: null, source: null, answer: null, answerText: "", cards: {} };

  async function api(method, path, body) {
    const response = await fetch(path, {
      method: method,
      headers: body ? { "Content-Type": "application/json" } : {},
      body: body ? JSON.stringify(body) : undefined,
      credentials: "same-origin",
    });
    const data = await response.json().catch(function () { return {}; });
    if (!response.ok) throw new Error((data.error && data.error.message) || response.statusText);
    return data;
  }

  function add(kind, html) {
    const node = document.createElement("div");
    node.className = kind;
    node.innerHTML = html;
    transcript.appendChild(node);
    transcript.scrollTop = transcript.scrollHeight;
    return node;
  }
  function message(role, text) { return add("msg " + role, renderMarkdown(text)); }
  function note(text) { return add("msg note", escapeHtml(text)); }

  function cost(usage) {
    if (!usage) return "";
    const tokens = (usage.input_tokens || 0) + (usage.cache_read_tokens || 0) +
      (usage.cache_write_tokens || 0) + (usage.output_tokens || 0);
    const dollars = usage.estimated_cost_usd;
    return tokens + " tokens" + (dollars == null ? "" : " · $" + Number(dollars).toFixed(4));
  }

  async function loadSessions() {
    const list = await api("GET", "/v1/sessions?limit=100");
    const ul = $("sessions");
    ul.innerHTML = "";
    list.data.forEach(function (s) {
      const li = document.createElement("li");
      li.dataset.id = s.id;
      li.className = s.id === state.session ? "active" : "";
      li.innerHTML = escapeHtml(s.title || s.preview || s.id) +
        '<span class="meta">' + escapeHtml(s.message_count + " messages · " + cost(s.usage)) + "</span>";
      li.onclick = function () { openSession(s.id); };
      ul.appendChild(li);
    });
  }

  function toolCard(callId, name, args) {
    const card = add("card tool", '<div class="head"></div><div class="body"><pre class="args"></pre><pre class="output">running…</pre></div>');
    card.querySelector(".head").textContent = "⚙ " + name;
    card.querySelector(".args").textContent = typeof args === "string" ? args : JSON.stringify(args, null, 1);
    state.cards[callId] = card;
    return card;
  }
  function toolResult(callId, name, result, isError) {
    const card = state.cards[callId] || toolCard(callId, name, "");
    card.querySelector(".output").textContent = result;
    if (isError) card.classList.add("error");
  }

  async function openSession(id) {
    if (state.run) return;
    const session = await api("GET", "/v1/sessions/" + encodeURIComponent(id));
    state.session = id;
    transcript.innerHTML = "";
    $("session-title").textContent = session.title || id;
    $("usage").textContent = cost(session.usage);
    const names = {};
    session.messages.forEach(function (m) {
      if (m.role === "user") message("user", textOf(m.content));
      else if (m.role === "assistant") {
        if (textOf(m.content)) message("assistant", textOf(m.content));
        (m.tool_calls || []).forEach(function (c) { names[c.id] = c.function.name; toolCard(c.id, c.function.name, c.function.arguments); });
      } else if (m.role === "tool") toolResult(m.tool_call_id, names[m.tool_call_id] || "tool", textOf(m.content), false);
    });
    loadSessions();
  }
  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map(function (p) { return p.text || ""; }).join("\n");
    return "";
  }

  function approvalCard(data) {
    const card = add("card approval", '<div class="head">Approval needed</div><div class="body"><pre class="command"></pre><div class="reason"></div><div class="choices"></div></div>');
    card.dataset.request = data.request_id;
    card.querySelector(".command").textContent = data.command;
    card.querySelector(".reason").textContent = data.reason;
    const choices = card.querySelector(".choices");
    (data.choices || ["once", "deny"]).forEach(function (choice) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = choice === "once" ? "Approve once" : choice === "deny" ? "Deny" : "Approve (" + choice + ")";
      button.className = choice === "deny" ? "deny" : "";
      button.onclick = function () { answer("approvals", data.request_id, { decision: choice }); };
      choices.appendChild(button);
    });
    state.cards[data.request_id] = card;
  }
  function clarifyCard(data) {
    const card = add("card approval", '<div class="head">Question</div><div class="body"><div class="q"></div><input class="a" type="text"><button type="button">Answer</button></div>');
    card.querySelector(".q").textContent = data.question + (data.choices ? " (" + data.choices.join(" / ") + ")" : "");
    card.querySelector("button").onclick = function () {
      answer("clarify", data.request_id, { answer: card.querySelector(".a").value });
    };
    state.cards[data.request_id] = card;
  }
  function settle(requestId, text) {
    const card = state.cards[requestId];
    if (!card) return;
    card.querySelectorAll("button, input").forEach(function (b) { b.disabled = true; });
    card.querySelector(".head").textContent += " — " + text;
  }
  async function answer(kind, requestId, body) {
    try { await api("POST", "/v1/runs/" + state.run + "/" + kind + "/" + requestId, body); }
    catch (error) { note("could not answer: " + error.message); }
  }

  const handlers = {
    "message.delta": function (d) {
      state.streamed = true;
      if (!state.answer) { state.answer = message("assistant", ""); state.answerText = ""; }
      state.answerText += d.text;
      state.answer.innerHTML = renderMarkdown(state.answerText);
      transcript.scrollTop = transcript.scrollHeight;
    },
    "tool.started": function (d) { state.answer = null; toolCard(d.call_id, d.name, d.arguments); },
    "tool.completed": function (d) { toolResult(d.call_id, d.name, d.result, d.is_error); },
    "approval.requested": approvalCard,
    "approval.resolved": function (d) { settle(d.request_id, d.decision); },
    "clarify.requested": clarifyCard,
    "clarify.resolved": function (d) { settle(d.request_id, "answered"); },
    "request.withdrawn": function (d) { settle(d.request_id, "withdrawn (" + d.reason + ")"); },
    "notice": function (d) { note(d.message); },
    "run.completed": function (d) { finish(d, null); },
    "run.cancelled": function (d) { finish(d, "cancelled"); },
    "run.failed": function (d) { add("msg error", escapeHtml(d.error || "the run failed")); finish(d, null); },
  };

  function finish(data, label) {
    if (label) note(label);
    if (!state.streamed && data.final_response) message("assistant", data.final_response);
    $("usage").textContent = "this turn: " + cost(data.usage);
    state.source.close();
    state.run = null; state.source = null; state.answer = null;
    $("send").disabled = false; $("cancel").hidden = true;
    loadSessions();
  }

  async function send(text) {
    message("user", text);
    $("send").disabled = true;
    try {
      const run = await api("POST", "/v1/runs", { input: text, session_id: state.session || undefined });
      state.run = run.run_id; state.session = run.session_id; state.streamed = false;
      $("session-title").textContent = run.session_id;
      $("cancel").hidden = false;
      const source = new EventSource(run.events_url);
      state.source = source;
      Object.keys(handlers).forEach(function (name) {
        source.addEventListener(name, function (event) { handlers[name](JSON.parse(event.data)); });
      });
    } catch (error) {
      add("msg error", escapeHtml(error.message));
      $("send").disabled = false;
    }
  }

  $("composer").onsubmit = function (event) {
    event.preventDefault();
    const text = $("input").value.trim();
    if (!text || state.run) return;
    $("input").value = "";
    send(text);
  };
  $("input").onkeydown = function (event) {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
  };
  $("cancel").onclick = function () {
    if (state.run) api("POST", "/v1/runs/" + state.run + "/cancel").catch(function (e) { note(e.message); });
  };
  $("new-chat").onclick = function () {
    if (state.run) return;
    state.session = null; transcript.innerHTML = "";
    $("session-title").textContent = "New chat"; $("usage").textContent = "";
    loadSessions();
  };
  loadSessions().catch(function (error) { note(error.message); });
})();

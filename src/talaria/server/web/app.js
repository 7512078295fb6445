// The web chat: sessions on the side, one run at a time, its events streamed over fetch.
// The server's key comes in this page's address (/?token=..., printed by talaria serve): the
// page keeps it for this tab, removes it from the address bar, and sends it as a bearer header
// on every request. No cookie is involved, so no other web page can borrow it.
"use strict";
(function () {
  const $ = function (id) { return document.getElementById(id); };
  const transcript = $("transcript");
  const state = { session: null, run: null, stream: null, answer: null, answerText: "", thought: null, cards: {} };
  const token = takeToken();

  function takeToken() {
    const address = new URL(window.location.href);
    const offered = address.searchParams.get("token");
    if (offered) {
      sessionStorage.setItem("talaria.token", offered);
      address.searchParams.delete("token");
      history.replaceState(null, "", address.pathname + address.search + address.hash);
    }
    return sessionStorage.getItem("talaria.token") || "";
  }

  function authorised(headers) {
    return Object.assign({ Authorization: "Bearer " + token }, headers || {});
  }

  async function failure(response) {
    const data = await response.json().catch(function () { return {}; });
    const error = new Error(response.status === 401
      ? "this page needs the server's key: open the address talaria serve printed (…/?token=…)"
      : (data.error && data.error.message) || response.statusText);
    error.status = response.status;
    return error;
  }

  async function api(method, path, body) {
    const response = await fetch(path, {
      method: method,
      headers: authorised(body ? { "Content-Type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
      credentials: "omit",
    });
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  // A server-sent event stream read with fetch (EventSource cannot send a header): each event
  // goes to onEvent(name, data); a dropped stream is resumed after the last event seen.
  function follow(path, onEvent, onGone) {
    const control = new AbortController();
    let lastId = 0;
    function dispatch(block) {
      let name = "message";
      const data = [];
      block.split("\n").forEach(function (line) {
        const colon = line.indexOf(":");
        if (colon <= 0) return;
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") lastId = Number(value);
        else if (field === "event") name = value;
        else if (field === "data") data.push(value);
      });
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
    async function read() {
      const response = await fetch(path, {
        headers: authorised({ "Last-Event-ID": String(lastId) }),
        credentials: "omit",
        signal: control.signal,
      });
      if (!response.ok) throw await failure(response);
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) return;
        connection(true);
        buffer += chunk.value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          dispatch(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    }
    (async function () {
      while (!control.signal.aborted) {
        try { await read(); connection(true); }
        catch (error) {
          if (control.signal.aborted) return;
          if (error.status) { connection(true); onGone(error); return; }  // the server said no: final
          connection(false);
        }
        await new Promise(function (resolve) { setTimeout(resolve, 1000); });
      }
    })();
    return control;
  }

  // A banner while the server cannot be reached; gone again once a stream reconnects.
  function connection(up) {
    $("offline").hidden = up;
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

  function reasoningCard(text) {
    const card = add("card reasoning", '<details><summary>Reasoning</summary><div class="text"></div></details>');
    card.querySelector(".text").textContent = text;
    return card;
  }

  function toolCard(callId, name, args) {
    if (state.cards[callId]) return state.cards[callId];  // a replayed event after a reload
    const card = add("card tool", '<div class="head"></div><div class="body"><pre class="args"></pre><pre class="output">running…</pre></div>');
    card.querySelector(".head").textContent = "⚙ " + name;
    card.querySelector(".args").textContent = typeof args === "string" ? args : JSON.stringify(args, null, 1);
    state.cards[callId] = card;
    return card;
  }
  // A sub-agent's request or tool call names it (its definition, else its place in the
  // delegate_task call) and its task; its calls are cards of their own under the parent's.
  function subagentName(s) { return s.agent || "sub-agent " + (s.task_index + 1); }
  function subagentLabel(s) { return subagentName(s) + " (" + s.task + ")"; }
  function subagentCall(d) { return d.subagent.parent_call_id + "/" + d.call_id; }
  function toolResult(callId, name, result, isError) {
    const card = state.cards[callId] || toolCard(callId, name, "");
    card.querySelector(".output").textContent = result;
    if (isError) card.classList.add("error");
  }

  async function openSession(id) {
    if (state.run) return;
    const session = await api("GET", "/v1/sessions/" + encodeURIComponent(id));
    choose(id);
    transcript.innerHTML = "";
    state.cards = {};
    $("session-title").textContent = session.title || id;
    $("usage").textContent = cost(session.usage);
    // A turn still running: its stored part is replayed from the run's own events instead.
    const running = session.running_run_id;
    let shown = session.messages;
    if (running) {
      const lastUser = shown.map(function (m) { return m.role; }).lastIndexOf("user");
      shown = lastUser >= 0 ? shown.slice(0, lastUser + 1) : shown;
    }
    const names = {};
    shown.forEach(function (m) {
      if (m.role === "user") message("user", textOf(m.content));
      else if (m.role === "assistant") {
        const thought = m.reasoning || m.reasoning_content;
        if (thought) reasoningCard(thought);
        if (textOf(m.content)) message("assistant", textOf(m.content));
        (m.tool_calls || []).forEach(function (c) { names[c.id] = c.function.name; toolCard(c.id, c.function.name, c.function.arguments); });
      } else if (m.role === "tool") toolResult(m.tool_call_id, names[m.tool_call_id] || "tool", textOf(m.content), false);
    });
    if (running) attach(running, "/v1/runs/" + running + "/events");
    loadSessions();
  }

  // The open session is kept in the address (#session=<id>), so a reload comes back to it.
  function choose(id) {
    state.session = id;
    $("changes-button").hidden = !id;
    if (!id) $("changes").hidden = true;
    history.replaceState(null, "", id ? "#session=" + encodeURIComponent(id) : window.location.pathname);
  }
  function sessionInAddress() {
    const found = /^#session=(.+)$/.exec(window.location.hash);
    return found ? decodeURIComponent(found[1]) : null;
  }
  function textOf(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map(function (p) { return p.text || ""; }).join("\n");
    return "";
  }

  function approvalCard(data) {
    if (state.cards[data.request_id]) return;
    const card = add("card approval", '<div class="head">Approval needed</div><div class="body"><pre class="command"></pre><div class="reason"></div><div class="choices"></div></div>');
    card.dataset.request = data.request_id;
    if (data.subagent) card.querySelector(".head").textContent = "Approval needed for " + subagentLabel(data.subagent);
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
    card.scrollIntoView({ block: "nearest" });
  }
  function clarifyCard(data) {
    if (state.cards[data.request_id]) return;
    const card = add("card approval", '<div class="head">Question</div><div class="body"><div class="q"></div><input class="a" type="text"><button type="button">Answer</button></div>');
    card.querySelector(".q").textContent = data.question + (data.choices ? " (" + data.choices.join(" / ") + ")" : "");
    if (data.subagent) card.querySelector(".head").textContent = "Question from " + subagentLabel(data.subagent);
    card.querySelector("button").onclick = function () {
      answer("clarify", data.request_id, { answer: card.querySelector(".a").value });
    };
    state.cards[data.request_id] = card;
    card.scrollIntoView({ block: "nearest" });
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

  // Checkpoints: the session's turns with the files each changed, a Rewind button per turn
  // (files, conversation or both; the report says what was restored, what the user's own
  // edits kept and what was left alone, and offers the undo), and what the agent changed as a
  // diff, for the whole session or since a turn.
  function sessionPath(rest) { return "/v1/sessions/" + encodeURIComponent(state.session) + rest; }
  function button(parent, label, className, onclick) {
    const b = document.createElement("button");
    b.type = "button"; b.textContent = label; b.className = className; b.onclick = onclick;
    parent.appendChild(b);
    return b;
  }
  function changesPart(name) { return $("changes").querySelector("." + name); }

  async function showChanges() {
    $("changes").hidden = false;
    const list = changesPart("turns");
    list.textContent = "loading…";
    try {
      const turns = (await api("GET", sessionPath("/checkpoints"))).data;
      list.innerHTML = "";
      if (!turns.length) list.textContent = "No checkpoints yet: the agent has changed nothing.";
      turns.forEach(function (t) { list.appendChild(turnRow(t)); });
      await showDiff(null);
    } catch (error) { list.textContent = "checkpoints unavailable: " + error.message; }
  }

  function turnRow(t) {
    const row = document.createElement("div");
    row.className = "turn" + (t.dropped ? " dropped" : "");
    row.dataset.turn = t.id;
    row.innerHTML = '<div class="what"></div><div class="files"></div><div class="actions"></div>';
    row.querySelector(".what").textContent = (t.kind === "turn" ? "Turn " + t.id : "#" + t.id) +
      " · " + t.label + (t.dropped ? " (rewound)" : "");
    row.querySelector(".files").textContent = (t.changed.length ? t.changed.join(", ") : "no files changed") +
      (t.steps && t.steps.length ? " · " + t.steps.length + " step(s)" : "");
    turnActions(row, t);
    return row;
  }
  function turnActions(row, t) {
    const actions = row.querySelector(".actions");
    actions.innerHTML = "";
    button(actions, "Diff since", "diff-since", function () { showDiff(t.id); });
    button(actions, "Rewind…", "rewind", function () {
      actions.innerHTML = "";
      [["files", "Files"], ["conversation", "Conversation"], ["both", "Both"]].forEach(function (pair) {
        button(actions, pair[1], "rewind-" + pair[0], function () { rewind(t.id, pair[0]); });
      });
      (t.steps || []).forEach(function (tools, index) {  // the files before one step
        button(actions, "Before step " + (index + 1) + " · " + tools, "rewind-step", function () {
          rewind(t.id, "files", index + 1);
        });
      });
      button(actions, "Cancel", "cancel-rewind", function () { turnActions(row, t); });
    });
  }

  async function rewind(turn, what, step) {
    const body = { turn: turn, step: step, files: what !== "conversation", conversation: what !== "files" };
    try {
      const report = await api("POST", sessionPath("/rewind"), body);
      if (report.conversation) await openSession(state.session);  // the conversation as it is now
      await showChanges();
      showReport(report);
    } catch (error) { changesPart("report").textContent = "not rewound: " + error.message; }
  }

  function showReport(r) {
    const box = changesPart("report");
    box.innerHTML = "";
    const line = function (text, className) {
      const div = document.createElement("div");
      div.className = className || ""; div.textContent = text; box.appendChild(div);
    };
    line("Rewound to before " + (r.step ? "step " + r.step + " of turn " : "turn ") + r.turn + ".", "done");
    if (r.conversation) line("The conversation continues from before turn " + r.turn + ".");
    const groups = [
      ["restored", r.restored, "file(s) restored"],
      ["kept", r.kept, "file(s) you edited since: kept as you left them"],
      ["left-alone", r.left_alone, "file(s) left alone (over the size cap, ignored, or outside the workspace now)"],
    ];
    groups.forEach(function (g) {
      if (g[0] !== "restored" && !g[1].length) return;
      line(g[1].length + " " + g[2] + (g[1].length ? ":" : ""), "group " + g[0]);
      g[1].forEach(function (path) { line(path, "path " + g[0]); });
    });
    if (r.undo != null && r.restored.length) {
      button(box, "Undo (put the files back)", "undo", function () { rewind(r.undo, "files"); });
    }
  }

  async function showDiff(since) {
    const pre = changesPart("diff");
    const data = await api("GET", sessionPath("/diff" + (since == null ? "" : "?since=" + since)));
    changesPart("diff-title").textContent = since == null ? "What the agent changed in this session" : "What the agent changed since turn " + since;
    pre.innerHTML = "";
    if (!data.diff) { pre.textContent = "No changes."; return; }
    data.diff.split("\n").forEach(function (text) {
      const span = document.createElement("span");
      span.className = /^(\+\+\+|---|diff )/.test(text) ? "file" : text[0] === "+" ? "add" :
        text[0] === "-" ? "del" : text.startsWith("@@") ? "hunk" : "";
      span.textContent = text + "\n";
      pre.appendChild(span);
    });
  }

  $("changes-button").onclick = function () {
    if ($("changes").hidden) showChanges(); else $("changes").hidden = true;
  };
  changesPart("close").onclick = function () { $("changes").hidden = true; };
  changesPart("whole").onclick = function () { showDiff(null).catch(function (e) { note(e.message); }); };

  const handlers = {
    "message.delta": function (d) {
      state.streamed = true;
      state.thought = null;
      if (!state.answer) { state.answer = message("assistant", ""); state.answerText = ""; }
      state.answerText += d.text;
      state.answer.innerHTML = renderMarkdown(state.answerText);
      transcript.scrollTop = transcript.scrollHeight;
    },
    "reasoning.delta": function (d) {
      if (!state.thought) { state.thought = reasoningCard(""); }
      const text = state.thought.querySelector(".text");
      text.textContent += d.text;
    },
    "tool.started": function (d) { state.answer = null; state.thought = null; toolCard(d.call_id, d.name, d.arguments); },
    "tool.completed": function (d) { toolResult(d.call_id, d.name, d.result, d.is_error); },
    "subagent.tool.started": function (d) { toolCard(subagentCall(d), "↳ " + subagentName(d.subagent) + ": " + d.name, d.arguments); },
    "subagent.tool.completed": function (d) { toolResult(subagentCall(d), d.name, d.result, d.is_error); },
    "approval.requested": approvalCard,
    "approval.resolved": function (d) { settle(d.request_id, d.decision); },
    "clarify.requested": clarifyCard,
    "clarify.resolved": function (d) { settle(d.request_id, "answered"); },
    "request.withdrawn": function (d) { settle(d.request_id, "withdrawn (" + d.reason + ")"); },
    "notice": function (d) { note(d.message); },
    "steer.accepted": function (d) { state.answer = null; add("msg user steer", renderMarkdown(d.text)); },
    "message.queued": function (d) {
      const waiting = note("queued (" + d.position + "): " + d.text);
      waiting.dataset.queued = d.message_id;
    },
    "queued_message.started": function (d) {
      const waiting = transcript.querySelector('[data-queued="' + d.message_id + '"]');
      if (waiting) waiting.remove();
      state.answer = null; state.thought = null;
      message("user", d.text);
    },
    "run.completed": function (d) { finish(d, null); },
    "run.cancelled": function (d) { finish(d, "cancelled"); },
    "run.failed": function (d) { add("msg error", escapeHtml(d.error || "the run failed")); finish(d, null); },
  };

  function finish(data, label) {
    if (label) note(label);
    if (!state.streamed && data.final_response) message("assistant", data.final_response);
    $("usage").textContent = "this turn: " + cost(data.usage);
    idle();
  }

  function idle() {
    if (state.stream) state.stream.abort();
    state.run = null; state.stream = null; state.answer = null; state.thought = null;
    $("send").textContent = "Send"; $("cancel").hidden = true; $("steer").hidden = true;
    loadSessions().catch(function (error) { note(error.message); });
  }

  // The run's stream was refused for good: the server restarted (its runs are gone) or
  // forgot the run. What the turn stored is in the session; show that and take input again.
  function lost(error) {
    const session = state.session;
    idle();
    if (error.status !== 404) { note(error.message); return; }
    const gone = "the live view of this turn is gone (the server restarted); showing what was saved";
    (session ? openSession(session) : Promise.resolve()).then(
      function () { note(gone); }, function (e) { note(gone); note(e.message); });
  }

  function attach(runId, eventsUrl) {
    state.run = runId; state.streamed = false;
    $("send").textContent = "Queue"; $("cancel").hidden = false; $("steer").hidden = false;
    state.stream = follow(eventsUrl, function (name, data) {
      if (handlers[name]) handlers[name](data);
    }, lost);
  }

  async function send(text) {
    message("user", text);
    $("send").disabled = true;
    try {
      const run = await api("POST", "/v1/runs", { input: text, session_id: state.session || undefined });
      choose(run.session_id);
      $("session-title").textContent = run.session_id;
      $("send").disabled = false;
      attach(run.run_id, run.events_url);
    } catch (error) {
      add("msg error", escapeHtml(error.message));
      $("send").disabled = false;
      if (error.status === 409) openSession(state.session).catch(function () {});  // busy: show it
    }
  }

  // While a turn runs, Enter (the Queue button) queues the message for after it, and Steer
  // hands it to the running turn before its next model call; the run's events show both.
  $("composer").onsubmit = function (event) {
    event.preventDefault();
    const text = $("input").value.trim();
    if (!text) return;
    $("input").value = "";
    if (!state.run) { send(text); return; }
    api("POST", "/v1/sessions/" + encodeURIComponent(state.session) + "/queue", { text: text })
      .catch(function (e) { note("not queued: " + e.message); });
  };
  $("steer").onclick = function () {
    const text = $("input").value.trim();
    if (!text || !state.run) return;
    $("input").value = "";
    api("POST", "/v1/runs/" + state.run + "/steer", { text: text })
      .catch(function (e) { note("not steered: " + e.message); });
  };
  $("input").onkeydown = function (event) {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); $("composer").requestSubmit(); }
  };
  $("cancel").onclick = function () {
    if (state.run) api("POST", "/v1/runs/" + state.run + "/cancel").catch(function (e) { note(e.message); });
  };
  $("new-chat").onclick = function () {
    if (state.run) return;
    choose(null); transcript.innerHTML = ""; state.cards = {};
    $("session-title").textContent = "New chat"; $("usage").textContent = "";
    document.body.classList.remove("sessions-open");
    loadSessions();
  };
  $("toggle-sessions").onclick = function () { document.body.classList.toggle("sessions-open"); };
  $("sessions").addEventListener("click", function () { document.body.classList.remove("sessions-open"); });

  const reopen = sessionInAddress();
  (reopen ? openSession(reopen) : loadSessions()).catch(function (error) {
    if (reopen) { choose(null); loadSessions().catch(function () {}); }
    note(error.message);
  });
})();

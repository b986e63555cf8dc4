// @ts-check
// The "no API key" panel: "Set up a provider" opens the settings panel; or which variable to set for which provider,
// or how to use a local server.
import { h, icon } from "./dom.js";

const PROVIDERS = [
  ["deepseek", "DeepSeek", "DEEPSEEK_API_KEY"],
  ["kimi", "Kimi (Moonshot)", "MOONSHOT_API_KEY"],
  ["qwen", "Qwen (DashScope)", "DASHSCOPE_API_KEY"],
  ["siliconflow", "SiliconFlow", "SILICONFLOW_API_KEY"],
  ["openai", "OpenAI", "OPENAI_API_KEY"],
];
const LOCAL_SERVERS = [
  ["Ollama", "http://localhost:11434/v1"],
  ["vLLM", "http://localhost:8000/v1"],
  ["llama.cpp server", "http://localhost:8080/v1"],
];

function code(text) {
  return h("code", { class: "inline-code" }, text);
}

/** Show or hide the panel for a get_status answer; onRecheck() asks the server again, onSetUp() opens the settings. */
export function renderApiSetup(panel, status, onRecheck, onSetUp) {
  const api = status?.api;
  if (!api || api.configured !== false) {
    panel.hidden = true;
    panel.replaceChildren();
    return;
  }
  const current = status.provider ?? "deepseek";
  const rows = PROVIDERS.map(([id, label, variable]) => h(
    "tr",
    { class: id === current ? "current" : "" },
    h("td", {}, label, id === current ? h("span", { class: "tag", text: "selected" }) : null),
    h("td", {}, code(variable)),
  ));
  const local = LOCAL_SERVERS.map(([name, url]) => h("li", {}, h("span", { class: "local-name", text: name }), h("pre", { class: "setup-command" }, `AGENT_PROVIDER=custom AGENT_BASE_URL=${url}`)));
  panel.replaceChildren(
    h("div", { class: "setup-head" },
      icon("key", "setup-icon"),
      h("div", {},
        h("h2", { id: "api-setup-title", text: "Connect a model to start chatting" }),
        h("p", { text: api.message || `No API key is set for the provider "${current}".` }),
        h("p", { class: "setup-action" },
          h("button", { type: "button", class: "btn btn-primary", "data-testid": "setup-open-settings", onclick: onSetUp }, icon("key"), "Set up a provider"),
          " Choose the provider and model and enter the key here: no restart needed."))),
    h("div", { class: "setup-grid" },
      h("section", {},
        h("h3", { text: "Or set it where the server starts" }),
        h("p", {}, "Set the provider's key in the environment or in ", code(".env"), " next to the server, then restart it:"),
        h("table", { class: "setup-table" },
          h("thead", {}, h("tr", {}, h("th", { text: "Provider" }), h("th", { text: "Variable" }))),
          h("tbody", {}, rows)),
        h("p", { class: "hint" }, code("AGENT_API_KEY"), " works with any provider; choose the provider with ", code("AGENT_PROVIDER"), "."),
        api.key_env ? h("p", { class: "hint" }, "This server expects: ", code(api.key_env)) : null),
      h("section", {},
        h("h3", { text: "Or use a local server" }),
        h("p", {}, "Any OpenAI-compatible server works; name its model with ", code("AGENT_MODEL"), ":"),
        h("ul", { class: "local-list" }, local),
        api.base_url ? h("p", { class: "hint" }, "Current endpoint: ", code(api.base_url)) : null)),
    h("p", { class: "setup-demo", "data-testid": "setup-demo" },
      h("strong", { text: "No key yet? " }), "Try the demo: ", code("make demo"),
      " runs a scripted model on a sample workspace (no key, no network; the tools are real)."),
    h("div", { class: "setup-foot" },
      h("span", { class: "hint", text: "The file tree and past conversations work without a key." }),
      h("button", { type: "button", class: "btn btn-sm", onclick: onRecheck }, icon("refresh"), "Check again")),
  );
  panel.setAttribute("aria-labelledby", "api-setup-title");
  panel.hidden = false;
}

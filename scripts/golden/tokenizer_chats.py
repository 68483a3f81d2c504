# -*- coding: utf-8 -*-
"""Chat-template cases for the goldens: every branch of the Qwen3 template (system/user/
assistant turns, add_generation_prompt, enable_thinking, reasoning kept only after the last
user query, reasoning_content, tools, tool_calls, runs of tool messages), hand-written ones
first, then seeded random conversations. Written for this project."""

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Température en °C; 天气.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "threshold": {"type": "number", "default": 0.5, "examples": [1e-07, 1e16, 100.0, -2.25]},
                "detailed": {"type": "boolean", "default": False},
                "extra": {"type": ["string", "null"], "default": None},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "top_k": {"type": "integer"}}},
        "name": "web_search",
        "description": "Search the web. Escapes: \"quotes\", back\\slash, tab\t, newline\n, \u0001.",
    },
}
CALC = {"type": "function", "function": {"name": "calc", "description": "", "parameters": {}}}
TOOLSETS = [[WEATHER], [SEARCH], [WEATHER, SEARCH, CALC], [CALC]]


def call(name, args, wrap=True):
    c = {"name": name, "arguments": args}
    return {"id": "call_1", "type": "function", "function": c} if wrap else c


def case(name, messages, tools=None, agp=True, thinking=None):
    return {"name": name, "messages": messages, "tools": tools, "add_generation_prompt": agp,
            "enable_thinking": thinking}


def fixed_cases():
    u = {"role": "user", "content": "What is the capital of France?"}
    s = {"role": "system", "content": "You are a helpful assistant. Réponds en français."}
    a_think = {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."}
    u2 = {"role": "user", "content": "And of Japan? 日本の首都は？"}
    a2_think = {"role": "assistant", "content": "<think>\nJapan → Tokyo.\n</think>\n\nTokyo (東京)."}
    wc = call("get_weather", {"city": "Zürich", "days": 3, "threshold": 0.25, "tags": ["a", "ü"], "nested": {"x": None, "y": True}})
    C = []
    C.append(case("user_only", [u]))
    C.append(case("user_only_no_think", [u], thinking=False))
    C.append(case("user_only_think_true", [u], thinking=True))
    C.append(case("system_user", [s, u]))
    C.append(case("system_user_no_gen", [s, u], agp=False))
    C.append(case("system_user_no_gen_no_think", [s, u], agp=False, thinking=False))
    C.append(case("plain_history", [s, u, {"role": "assistant", "content": "Paris."}, u2]))
    C.append(case("think_history_dropped", [u, a_think, u2, a2_think, {"role": "user", "content": "Thanks!"}]))
    C.append(case("think_last_kept", [u, a_think], agp=False))
    C.append(case("think_last_two", [u, a_think, u2, a2_think], agp=False, thinking=False))
    C.append(case("reasoning_content_last", [u, {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy: Paris."}], agp=False))
    C.append(case("reasoning_content_history", [u, {"role": "assistant", "content": "Paris.", "reasoning_content": "Easy."}, u2]))
    C.append(case("reasoning_content_empty_last", [u, {"role": "assistant", "content": "Paris.", "reasoning_content": ""}], agp=False))
    C.append(case("reasoning_content_newlines", [u, {"role": "assistant", "content": "\n\nParis.\n", "reasoning_content": "\n\nhmm\n\n"}], agp=False))
    C.append(case("reasoning_content_null", [u, {"role": "assistant", "content": "<think>r</think>x", "reasoning_content": None}], agp=False))
    C.append(case("reasoning_content_wins", [u, {"role": "assistant", "content": "<think>inner</think>outer", "reasoning_content": "given"}], agp=False))
    C.append(case("two_close_think", [u, {"role": "assistant", "content": "<think>a</think>b</think>\n\nc"}], agp=False))
    C.append(case("open_think_only", [u, {"role": "assistant", "content": "<think>never closed"}], agp=False))
    C.append(case("think_no_open_tag", [u, {"role": "assistant", "content": "plain reasoning\n</think>\n\nanswer"}], agp=False))
    C.append(case("empty_user", [{"role": "user", "content": ""}]))
    C.append(case("system_only", [s]))
    C.append(case("system_middle", [u, {"role": "assistant", "content": "Paris."}, {"role": "system", "content": "Be brief."}, u2]))
    C.append(case("special_text_in_user", [{"role": "user", "content": "<|im_start|>system\nignore<|im_end|>\n<think>x</think>"}]))
    C.append(case("soft_switch", [s, {"role": "user", "content": "Explain BPE /no_think"}], thinking=True))
    C.append(case("tools_no_system", [u], tools=[WEATHER]))
    C.append(case("tools_with_system", [s, u], tools=[WEATHER, SEARCH, CALC]))
    C.append(case("tools_empty_list", [s, u], tools=[]))
    C.append(case("tool_call_dict_args", [u, {"role": "assistant", "content": "", "tool_calls": [wc]}], tools=[WEATHER], agp=False))
    C.append(case("tool_call_null_content", [u, {"role": "assistant", "content": None, "tool_calls": [wc]}], tools=[WEATHER], agp=False))
    C.append(case("tool_call_string_args", [u, {"role": "assistant", "content": "", "tool_calls": [call("web_search", "{\"q\": \"tandem\", \"top_k\": 3}")]}], tools=[SEARCH], agp=False))
    C.append(case("tool_call_with_content", [u, {"role": "assistant", "content": "Let me check.", "tool_calls": [wc]}], tools=[WEATHER], agp=False))
    C.append(case("tool_calls_multiple", [u, {"role": "assistant", "content": "", "tool_calls": [wc, call("calc", {"expr": "2+2"}), call("web_search", "{}")]}], tools=TOOLSETS[2], agp=False))
    C.append(case("tool_call_unwrapped", [u, {"role": "assistant", "content": "", "tool_calls": [call("calc", {"expr": "1/3"}, wrap=False)]}], tools=[CALC], agp=False))
    tool_resp = {"role": "tool", "content": "{\"temp\": 21.5, \"sky\": \"☀️\"}"}
    tool_resp2 = {"role": "tool", "content": "second result\nwith lines"}
    C.append(case("tool_response_single", [u, {"role": "assistant", "content": "", "tool_calls": [wc]}, tool_resp], tools=[WEATHER]))
    C.append(case("tool_response_run", [u, {"role": "assistant", "content": "", "tool_calls": [wc, wc]}, tool_resp, tool_resp2], tools=[WEATHER]))
    C.append(case("tool_response_then_answer", [u, {"role": "assistant", "content": "", "tool_calls": [wc]}, tool_resp, {"role": "assistant", "content": "<think>\nIt is warm.\n</think>\n\nIt is 21.5 °C."}], tools=[WEATHER], agp=False))
    C.append(case("multi_step_tools", [s, u,
        {"role": "assistant", "content": "<think>\nNeed weather.\n</think>\n\n", "tool_calls": [wc]}, tool_resp,
        {"role": "assistant", "content": "", "reasoning_content": "Now search.", "tool_calls": [call("web_search", {"q": "Zürich"})]}, tool_resp2,
        {"role": "assistant", "content": "<think>\nDone.\n</think>\n\nSunny and 21.5 °C."}], tools=[WEATHER, SEARCH], agp=False))
    C.append(case("multi_step_then_user", [u, {"role": "assistant", "content": "<think>\nA\n</think>\n\n", "tool_calls": [wc]}, tool_resp,
        {"role": "assistant", "content": "<think>\nB\n</think>\n\nwarm"}, u2], tools=[WEATHER], thinking=False))
    C.append(case("user_tool_response_wrapper", [u, {"role": "assistant", "content": "<think>\nq\n</think>\n\ncall"},
        {"role": "user", "content": "<tool_response>\n42\n</tool_response>"}, {"role": "assistant", "content": "<think>\nr\n</think>\n\nok"}], agp=False))
    C.append(case("tool_first", [tool_resp, u]))
    C.append(case("tool_last_no_gen", [u, {"role": "assistant", "content": "", "tool_calls": [wc]}, tool_resp], tools=[WEATHER], agp=False))
    C.append(case("assistant_last_tool_call_empty_reasoning", [u, {"role": "assistant", "content": "", "tool_calls": [wc]}], tools=[WEATHER], agp=False))
    C.append(case("unicode_everywhere", [{"role": "system", "content": "系统：用中文回答。🙂"}, {"role": "user", "content": "Привет! مرحبا 👨‍👩‍👧 e\u0301"}], tools=[WEATHER]))
    C.append(case("crlf_and_spaces", [{"role": "user", "content": "line1\r\nline2\r\n\r\n   trailing   "}]))
    C.append(case("leading_newlines_content", [u, {"role": "assistant", "content": "\n\n\nanswer with leading newlines"}], agp=False))
    return C


def random_case(rng, k):
    words = ["Hello", "数据", "Привет", "مرحبا", "🙂", "test", "</think>", "<think>", "\n", "  ",
             "tool", "Zürich", "42", "3.14", "<|im_end|>", "e\u0301"]

    def text(n=None):
        return "".join(rng.choice(words) + rng.choice(["", " ", "\n"]) for _ in range(n or rng.randint(0, 8)))

    tools = rng.choice([None, None, []] + TOOLSETS)
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": text()})
    for _ in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": text(rng.randint(1, 6))})
        if rng.random() < 0.8:
            m = {"role": "assistant", "content": text()}
            r = rng.random()
            if r < 0.3:
                m["content"] = "<think>\n" + text() + "\n</think>\n\n" + text()
            elif r < 0.5:
                m["reasoning_content"] = text()
            if rng.random() < 0.4:
                m["tool_calls"] = [call(rng.choice(["get_weather", "web_search", "calc"]),
                                        rng.choice([{"a": rng.randint(0, 9), "b": text(2)}, "{\"raw\": 1}", {}]),
                                        wrap=rng.random() < 0.8) for _ in range(rng.randint(1, 3))]
                if rng.random() < 0.3:
                    m["content"] = None
                msgs.append(m)
                for _ in range(rng.randint(1, 3)):
                    msgs.append({"role": "tool", "content": text(3)})
                if rng.random() < 0.5:
                    msgs.append({"role": "assistant", "content": "<think>\n" + text() + "\n</think>\n\n" + text()})
            else:
                msgs.append(m)
    agp = msgs[-1]["role"] != "assistant" or rng.random() < 0.2
    thinking = rng.choice([None, True, False])
    return case(f"random_{k:02d}", msgs, tools=tools, agp=agp, thinking=thinking)


def make_chats(rng):
    return fixed_cases() + [random_case(rng, k) for k in range(40)]

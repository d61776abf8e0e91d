// JinjaTemplate feature by feature: each snippet is rendered here and by Python's jinja2
// configured as transformers (jinja_peer.py), and the texts must be equal; errors must
// name the template line.
#include "sinew/model/jinja_template.h"

#include <gtest/gtest.h>

#include "jinja_peer_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

const char* const kSnippets[] = {
    // whitespace control: trim_blocks, lstrip_blocks, -, +
    "a\n  {% if true %}\n    x\n  {% endif %}\nb\n",
    "a  {%- if true -%}  x  {%- endif -%}  b",
    "a\n  {%+ if true %}x{% endif %}\n{# comment #}\nb {{ 1 }}\n{{ 2 -}}\n  c",
    "{% for i in range(3) %}\n  {{ i }}\n{% endfor %}\n",
    "line1\r\nline2\n\n",
    // literals, str() and repr() of values
    "{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 0.00001 }} {{ 2.5e-7 }} {{ -3 }} {{ 'a' ~ 1 ~ none }}",
    "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }} {{ (1,) }} {{ ('a', 'b') }} {{ {} }} {{ 'q\"' }}",
    "{{ {'a': 1}|string }} {{ ['x\\n', 'y\\\\'] }} {{ \"\\u00e9\\t\" }}",
    // operators and precedence
    "{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 - -1 }}",
    "{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }}",
    "{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ not 0 and 'x' or 'y' }} {{ 0 or '' }}",
    "{{ 'yes' if 1 > 2 else 'no' }}|{{ 'yes' if false }}|{{ -2|abs }}",
    // filters
    "{{ '  pad  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ [1,2,3]|length }}|{{ 'héllo'|length }}|{{ {'a':1}|length }}",
    "{{ {'a': 1, 'b': [1, 2.0, none]}|tojson }}|{{ 'é \"q\" <&>'|tojson }}|{{ {'b': 1, 'a': {'c': []}}|tojson(indent=2) }}",
    "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, {}]|tojson(indent=4) }}|{{ 'tab\\tnl\\n'|tojson }}",
    "{% for k, v in {'x': 1, 'y': 2}|items %}{{ k }}={{ v }};{% endfor %}{{ {'a': 1}.items()|list }}",
    "{{ 'Hello World'|lower }} {{ 'up'|upper }} {{ 'hello world'|capitalize }} {{ 'hello big-world'|title }}",
    "{{ ['a', 'b']|join(', ') }} {{ [1, 2]|join }} {{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }}",
    "{{ 'one\\ntwo\\n\\nthree'|indent(2) }}|{{ 'x\\ny'|indent(4, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}",
    "{{ [1]|select|list }}{% if []|select %}generators are true{% endif %}{{ []|map('lower')|list }}",
    "{{ [3, 1, 2]|sort|list }} {{ ['b', 'A', 'a']|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }}",
    "{{ [1, 2]|first }} {{ [1, 2]|last }} {{ undefined_thing|default('dflt') }} {{ ''|default('e', true) }}",
    "{{ [{'n': 'a', 'ok': true}, {'n': 'b', 'ok': false}]|selectattr('ok')|map(attribute='n')|list }}",
    "{{ [{'n': 'a', 'r': 'x'}, {'n': 'b'}]|selectattr('r', 'defined')|list }}{{ [1, 2, 3, 4]|select('even')|list }}",
    "{{ [{'t': 'u'}, {'t': 's'}]|rejectattr('t', 'equalto', 'u')|list }}{{ ['A', 'B']|map('lower')|join }}",
    "{{ '42'|int + 1 }} {{ '3.5'|float }} {{ 3.7|int }} {{ 2.567|round(2) }} {{ [1, 2.5]|sum }}",
    // tests
    "{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }}",
    "{{ 1 is number }} {{ 1.5 is float }} {{ true is integer }} {{ 4 is divisibleby 2 }} {{ 3 is odd }} {{ x is not defined }}",
    "{{ 'a' is in ['a'] }} {{ true is sameas true }} {{ 1 is eq 1 }} {{ [] is sequence }} {{ range is callable }}",
    // subscripts, slices, string and dict methods
    "{{ [1, 2, 3][-1] }} {{ [1, 2, 3][1:] }} {{ [1, 2, 3][:-1] }} {{ [1, 2, 3][::-1] }} {{ 'hello'[1:3] }} {{ 'héllo'[1] }}",
    "{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y '.split() }}|{{ 'a b c'.split(' ', 1) }}",
    "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'ABC'.lower() }} {{ 'a'.upper() }} {{ '-'.join(['a', 'b']) }}",
    "{{ {'a': 1}.get('a') }} {{ {'a': 1}.get('b') }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1}.keys()|list }} {{ {'a': 1}.values()|list }}",
    "{{ {'items': 1}['items'] }}|{{ {'items': 1}.items is callable }}|{{ {'k': 'v'}['k'] }}|{{ {'k': 'v'}.k }}|{{ {'k': 'v'}.missing }}|{{ none.x }}",
    // for loops: loop variables, else, filter, break/continue, scoping
    "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}",
    "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% set x = 0 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}",
    "{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }} {{ ns.items }}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}{{ loop is defined }}",
    "{% if false %}a{% elif 0 %}b{% elif 'x' %}c{% else %}d{% endif %}",
    // set forms, macros, filter blocks
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }}{% set block %}  inner {{ a }}  {% endset %}[{{ block }}]",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Al') }} {{ greet('Bo', punct='?') }} {{ greet(name='Cy') }}",
    "{% macro outer(x) %}[{{ inner(x) }}]{% endmacro %}{% macro inner(y) %}{{ y * 2 }}{% endmacro %}{{ outer(4) }}{% set y = 'global' %}",
    "{% filter upper %}shout {{ 'this' }}{% endfilter %}{% set s %}{% filter trim %}  t  {% endfilter %}{% endset %}[{{ s }}]",
    "{{ strftime_now('%d %b %Y') }} {{ range(2, 8, 3)|list }} {{ dict(a=1, b='x') }} {{ namespace(a=1).a }}",
    "{{ \"adjacent\" 'strings' }} {{ messages[0].content }} {{ messages|length }} {{ messages[0]['role'] }}",
    "{{ 'a'|safe + '<b>' }} {{ '\"q\"' + 'x'|safe }} {{ ('a'|safe + 'b')|trim + '&' }} {{ '<'|e }} {{ 'x'|safe ~ '<' }}",
    "{% generation %}gen {{ 1 }}{% endgeneration %}",
    // float literals past the double range (jinja_fuzz: std::stod threw out of the parser)
    "{{ 1e999 }} {{ -1e999 }} {{ 2e-999 }}",
};

json::object SnippetContext() {
  return json::object{{"messages", json::array{json::object{{"role", "user"}, {"content", "hi"}}}}};
}

TEST(JinjaTemplateTest, SnippetsRenderAsPythonJinja2) {
  std::vector<jinja_test::PeerCase> cases;
  for (const char* snippet : kSnippets) cases.push_back({snippet, SnippetContext()});
  const auto expected = jinja_test::RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size()) << "python3 with jinja2 did not run";
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].source);
    ASSERT_TRUE(expected[i].ok) << "Python: " << expected[i].text;
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(cases[i].source);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    Result<std::string> ours = parsed->Render(cases[i].context, std::chrono::system_clock::from_time_t(cases[i].now));
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    EXPECT_EQ(*ours, expected[i].text);
  }
}

// Snippets Python rejects must be rejected here too.
TEST(JinjaTemplateTest, ErrorsWherePythonRaises) {
  const char* const kFailing[] = {
      "{{ undefined_thing.attr }}", "{{ 1 + 'a' }}", "{{ {'a': 1}|tojson(separators=1) if false else x.y }}",
      "{{ raise_exception('boom') }}", "{{ 1 / 0 }}", "{{ none|length }}", "{{ [1]|map('upper')|tojson }}", "{{ ([1]|select)|length }}",
      "{% set x = 1 %}{% set x.a = 2 %}", "{{ 'a' < 1 }}", "{{ undefined_fn() }}",
  };
  std::vector<jinja_test::PeerCase> cases;
  for (const char* snippet : kFailing) cases.push_back({snippet, {}});
  const auto expected = jinja_test::RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].source);
    EXPECT_FALSE(expected[i].ok);
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(cases[i].source);
    if (!parsed.ok()) continue;
    EXPECT_FALSE(parsed->Render(cases[i].context).ok());
  }
}

// Integers past int64 (Python has no such limit) are refused with a message, wherever
// they appear; jinja_fuzz found `loop.444…4` throwing out of the parser.
TEST(JinjaTemplateTest, IntegersPastInt64AreRefusedNotThrown) {
  for (const char* source : {"{{ 99999999999999999999 }}", "{{ loop.44444444444444444444444 }}"}) {
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_FALSE(parsed.ok()) << source;
    EXPECT_NE(parsed.status().message().find("integer literal out of range"), std::string::npos)
        << parsed.status().message();
  }
  Result<JinjaTemplate> attr = JinjaTemplate::Parse("{{ messages|map(attribute='99999999999999999999')|list|length }}");
  ASSERT_TRUE(attr.ok()) << attr.status().ToString();
  EXPECT_TRUE(attr->Render(SnippetContext()).ok());  // looked up by name, not thrown
}

// Integer arithmetic past int64 fails with a message where Python would grow the int;
// jinja_fuzz found `09577035577**035` overflowing (undefined behaviour), and `**` looped
// once per unit of the exponent (`2 ** 9999999999999` would have run for hours).
TEST(JinjaTemplateTest, IntegerArithmeticPastInt64FailsWithAMessage) {
  for (const char* source :
       {"e {{ 09577035577**035 }}", "{{ 2 ** 9999999999999 }}", "{{ 2 ** 63 }}", "{{ 9223372036854775807 + 1 }}",
        "{{ -9223372036854775807 - 2 }}", "{{ 4294967296 * 4294967296 }}", "{{ (-9223372036854775807 - 1) // -1 }}",
        "{{ -(-9223372036854775807 - 1) }}", "{{ (-9223372036854775807 - 1)|abs }}",
        "{{ [9223372036854775807, 1]|sum }}"}) {
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_TRUE(parsed.ok()) << source << ": " << parsed.status().ToString();
    auto rendered = parsed->Render(SnippetContext());
    ASSERT_FALSE(rendered.ok()) << source << " gave " << *rendered;
    EXPECT_NE(rendered.status().message().find("integer overflow"), std::string::npos)
        << source << ": " << rendered.status().message();
  }
  // Up to the edge, the answers are Python's.
  const std::pair<const char*, const char*> fine[] = {
      {"{{ 2 ** 62 }}", "4611686018427387904"},
      {"{{ (-2) ** 63 }}", "-9223372036854775808"},
      {"{{ 1 ** 9999999999999 }}", "1"},
      {"{{ (-1) ** 9999999999999 }}", "-1"},
      {"{{ 0 ** 9999999999999 }}", "0"},
      {"{{ (-9223372036854775807 - 1) % -1 }}", "0"},
      {"{{ 7 // -1 }}", "-7"},
      {"{{ 9223372036854775807 % -2 }}", "-1"},
      {"{{ 9223372036854775807 // -2 }}", "-4611686018427387904"},
      {"{{ -7 % 3 }}", "2"},
      {"{{ range(9223372036854775800, 9223372036854775807, 100)|list|length }}", "1"},
  };
  for (const auto& [source, expected] : fine) {
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_TRUE(parsed.ok()) << source;
    auto rendered = parsed->Render(SnippetContext());
    ASSERT_TRUE(rendered.ok()) << source << ": " << rendered.status().ToString();
    EXPECT_EQ(*rendered, expected) << source;
  }
}

// A template comes with a model file: one that would build gigabytes or run for hours
// fails with a message at the renderer's bounds instead. Small bounds keep the test quick
// (strings are values here: growing one to the server's 64 MiB takes seconds); the
// server's own are RenderBounds' defaults, and a render within the bounds is whole.
TEST(JinjaTemplateTest, RunawayTemplatesStopAtTheRenderersBoundsWithAMessage) {
  RenderBounds small;
  small.max_steps = 100'000;
  small.max_text_bytes = 1 << 20;
  small.max_items = 10'000;
  const std::pair<const char*, const char*> runaway[] = {
      {"{{ 'x' * 100000000000 }}", "past the renderer's bound of 1048576"},
      {"{{ [1, 2] * 100000000000 }}", "past the renderer's bound of 10000"},
      {"{% set ns = namespace(v='xy') %}{% for i in range(100) %}{% set ns.v = ns.v + ns.v %}{% endfor %}",
       "bytes is past the renderer's bound"},
      {"{% set ns = namespace(v='xy') %}{% for i in range(100) %}{% set ns.v = ns.v ~ ns.v %}{% endfor %}",
       "bytes is past the renderer's bound"},
      {"{% set ns = namespace(v='xy') %}{% for i in range(100) %}{% set ns.v = ns.v|replace('x', 'xx') %}{% endfor %}",
       "bytes is past the renderer's bound"},
      {"{% set ns = namespace(v='xy') %}{% for i in range(100) %}{% set ns.v = ns.v.replace('x', 'xx') %}{% endfor %}",
       "bytes is past the renderer's bound"},
      {"{% set ns = namespace(v=['xy']) %}{% for i in range(100) %}{% set ns.v = ns.v + ns.v %}{% endfor %}",
       "items is past the renderer's bound"},
      {"{% set ns = namespace(v=['xy']) %}{% for i in range(100) %}{% set ns.v = [ns.v|join, ns.v|join] %}{% endfor %}",
       "bytes is past the renderer's bound"},
      {"{% for i in range(100) %}{{ 'x' * 100000 }}{% endfor %}", "bytes is past the renderer's bound"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
       "past the renderer's bound of 100000 steps"},
  };
  for (const auto& [source, expected] : runaway) {
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_TRUE(parsed.ok()) << source << ": " << parsed.status().ToString();
    auto rendered = parsed->Render(SnippetContext(), std::chrono::system_clock::now(), small);
    ASSERT_FALSE(rendered.ok()) << source;
    EXPECT_NE(rendered.status().message().find(expected), std::string::npos)
        << source << ": " << rendered.status().message();
  }
  Result<JinjaTemplate> within = JinjaTemplate::Parse(
      "{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}{{ ('x' * 500000)|length }}");
  ASSERT_TRUE(within.ok());
  auto whole = within->Render(SnippetContext(), std::chrono::system_clock::now(), small);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(*whole, "500000");
  const RenderBounds defaults;
  EXPECT_EQ(defaults.max_steps, 1'000'000u);
  EXPECT_EQ(defaults.max_text_bytes, size_t{64} << 20);
}

TEST(JinjaTemplateTest, ErrorsNameTheTemplateLine) {
  Result<JinjaTemplate> bad_syntax = JinjaTemplate::Parse("line one\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(bad_syntax.ok());
  EXPECT_EQ(bad_syntax.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_syntax.status().message().find("line 3"), std::string::npos) << bad_syntax.status().message();

  Result<JinjaTemplate> unclosed = JinjaTemplate::Parse("{% for x in y %}\n{{ x }}\n");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("endfor"), std::string::npos) << unclosed.status().message();

  Result<JinjaTemplate> unknown_filter = JinjaTemplate::Parse("a\nb\n{{ x|no_such_filter }}");
  ASSERT_FALSE(unknown_filter.ok());
  EXPECT_NE(unknown_filter.status().message().find("line 3: no filter named 'no_such_filter'"), std::string::npos)
      << unknown_filter.status().message();

  Result<JinjaTemplate> raises = JinjaTemplate::Parse(
      "{% for m in messages %}\n{% if m.role == 'system' %}\n{{ raise_exception('System role not supported') }}\n"
      "{% endif %}\n{% endfor %}");
  ASSERT_TRUE(raises.ok());
  json::object context{{"messages", json::array{json::object{{"role", "system"}, {"content", "x"}}}}};
  Result<std::string> rendered = raises->Render(context);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.status().message(), "chat template line 3: System role not supported");

  Result<JinjaTemplate> runtime = JinjaTemplate::Parse("ok\n\n{{ messages.first.role }}");
  ASSERT_TRUE(runtime.ok());
  Result<std::string> failed = runtime->Render({});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("line 3"), std::string::npos) << failed.status().message();
}

}  // namespace
}  // namespace sinew::model

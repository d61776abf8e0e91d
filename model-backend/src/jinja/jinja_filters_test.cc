// Every builtin filter and test of Jinja2 3.x, case by case, rendered here and by
// Python's jinja2 (jinja_peer.py) on the same input: the texts must be equal, or both
// must raise. `random` is not deterministic: its contract (an item of the input) is
// checked instead. New filters stay within the render's bounds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "jinja_peer_util.h"
#include "sinew/model/jinja_template.h"

namespace sinew::model {
namespace {

namespace json = boost::json;

// The builtin filters and tests of Jinja2 3.1 (jinja2.filters.FILTERS, jinja2.tests.TESTS).
const char* const kFilterNames[] = {
    "abs",      "attr",        "batch",     "capitalize", "center",  "count",     "d",         "default",
    "dictsort", "e",           "escape",    "filesizeformat", "first", "float",   "forceescape", "format",
    "groupby",  "indent",      "int",       "items",      "join",    "last",      "length",    "list",
    "lower",    "map",         "max",       "min",        "pprint",  "random",    "reject",    "rejectattr",
    "replace",  "reverse",     "round",     "safe",       "select",  "selectattr", "slice",    "sort",
    "string",   "striptags",   "sum",       "title",      "tojson",  "trim",      "truncate",  "unique",
    "upper",    "urlencode",   "urlize",    "wordcount",  "wordwrap", "xmlattr",
};
const char* const kTestNames[] = {
    "!=",      "<",        "<=",       "==",      ">",        ">=",       "boolean", "callable", "defined",
    "divisibleby", "eq",   "equalto",  "escaped", "even",     "false",    "filter",  "float",    "ge",
    "greaterthan", "gt",   "in",       "integer", "iterable", "le",       "lessthan", "lower",   "lt",
    "mapping", "ne",       "none",     "number",  "odd",      "sameas",   "sequence", "string",  "test",
    "true",    "undefined", "upper",
};

json::object Context() {
  return json::parse(R"({
    "users": [
      {"name": "bob", "city": "Paris", "age": 31, "tags": ["a"]},
      {"name": "Alice", "city": "paris", "age": 25, "tags": []},
      {"name": "carol", "city": "Berlin", "age": 31},
      {"name": "Dave", "city": "berlin", "age": 19, "tags": ["b", "c"]},
      {"name": "eve", "age": 42}],
    "props": {"zeta": {"type": "string"}, "Alpha": {"type": "integer"}, "beta": {"type": "boolean"},
              "alpha": {"type": "number"}},
    "scores": {"b": 2, "a": 3, "C": 1, "d": 2},
    "words": "The quick brown fox jumps over the lazy dog; well-known state-of-the-art text -- really.",
    "long": "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
    "nested": {"name": "tool", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "A city name, for example Paris or Berlin or Tokyo"}, "days": {"type": "integer"}}, "required": ["city"]}, "list": [1, 2.5, "three", null, true, [4, 5], {"six": 6}]}
  })").as_object();
}

// (template, what it exercises); each renders to the same text as Python's, or raises
// on both sides.
const char* const kCases[] = {
    // dictsort: case_sensitive, by, reverse (real chat templates sort tool properties)
    "{% for k, v in props|dictsort %}{{ k }}:{{ v.type }} {% endfor %}",
    "{% for k, v in props|dictsort(true) %}{{ k }} {% endfor %}|{{ props|dictsort(reverse=true)|map(attribute=0)|join(',') }}",
    "{{ scores|dictsort(false, 'value') }}|{{ scores|dictsort(by='value', reverse=true) }}|{{ scores|dictsort(case_sensitive=true, by='key') }}",
    "{{ scores|dictsort(by='neither') }}",
    "{{ [1, 2]|dictsort }}",
    "{{ {}|dictsort }}|{{ {'b': 1, 'a': 1}|dictsort(by='value') }}",
    "{{ {'a': 1, 'b': 'x'}|dictsort(by='value') }}",
    // groupby: attribute, default, case_sensitive, grouper/list and unpacking
    "{% for g in users|groupby('city', default='nowhere') %}{{ g.grouper }}={{ g.list|map(attribute='name')|join('+') }};{% endfor %}",
    "{% for city, items in users|groupby('city', 'none', true) %}{{ city }}:{{ items|length }} {% endfor %}",
    "{{ users|groupby('age')|map(attribute='grouper')|list }}|{{ (users|groupby('age'))[0] }}",
    "{{ users|groupby('city') }}",
    "{{ [[1, 'a'], [2, 'b'], [1, 'c']]|groupby(0)|list }}|{{ users|groupby('tags.0', default='-')|map(attribute='grouper')|list }}",
    // sort: attribute lists, case, reverse
    "{{ users|sort(attribute='age,name')|map(attribute='name')|join(' ') }}|{{ users|sort(attribute='name', case_sensitive=true)|map(attribute='name')|join(' ') }}",
    "{{ ['b', 'A', 'c', 'B']|sort }}|{{ ['b', 'A', 'c', 'B']|sort(true) }}|{{ ['b', 'A', 'c', 'B']|sort(reverse=true, case_sensitive=true) }}",
    "{{ users|sort(attribute='city')|map(attribute='name')|list }}",
    "{{ users|sort(attribute='name', reverse=true)|map(attribute='name')|list }}|{{ users|sort(attribute='tags.0,age')|map(attribute='age')|list if false }}",
    // min, max
    "{{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A', 'c']|min }} {{ ['b', 'A', 'C']|max(case_sensitive=true) }} {{ []|max }}|",
    "{{ users|min(attribute='age') }}|{{ (users|max(attribute='age')).name }}|{{ 'hello'|max }}|{{ users|max(attribute='name') }}",
    "{{ [1, 'a']|max }}",
    // batch, slice
    "{{ range(7)|batch(3)|list }}|{{ range(7)|batch(3, 'x')|list }}|{{ range(4)|batch(2.5)|list }}|{{ []|batch(2)|list }}|{{ range(3)|batch(0)|list }}|{{ range(3)|batch(-1, 0)|list }}",
    "{{ range(7)|slice(3)|list }}|{{ range(7)|slice(3, 'x')|list }}|{{ range(2)|slice(4)|list }}|{{ 'abcde'|slice(2)|list }}",
    "{{ range(3)|slice(0)|list }}",
    "{{ range(4)|batch(2.5, 0)|list }}",
    "{{ range(3)|slice(-2)|list }}",
    // center, truncate
    "[{{ 'ab'|center(7) }}][{{ 'abc'|center(8) }}][{{ 'abc'|center }}][{{ 'abcdef'|center(2) }}][{{ 'é'|center(4) }}][{{ 42|center(6) }}]",
    "{{ long|truncate(30) }}|{{ long|truncate(30, true) }}|{{ long|truncate(30, false, '…') }}|{{ long|truncate(30, end=' [more]', killwords=true) }}",
    "{{ 'foo bar baz qux'|truncate(9) }}|{{ 'foo bar baz qux'|truncate(11) }}|{{ 'foo bar baz qux'|truncate(11, false, '...', 0) }}|{{ 'foo bar'|truncate(5, leeway=2) }}",
    "{{ 'abcdefghij'|truncate(5) }}|{{ 'abcdefghijkl'|truncate(5) }}|{{ 'short'|truncate }}|{{ 'xyzw'|truncate(3, leeway=0) }}",
    "{{ long|truncate(2) }}",
    "{{ long|truncate(10, leeway=-1) }}",
    // wordwrap: width, break_long_words, wrapstring, break_on_hyphens, paragraphs
    "{{ words|wordwrap(20) }}",
    "{{ words|wordwrap(12, wrapstring=' / ') }}|{{ words|wordwrap(10, false) }}|{{ words|wordwrap(10, break_on_hyphens=false) }}",
    "{{ long|wordwrap }}|{{ 'Supercalifragilisticexpialidocious word'|wordwrap(10) }}|{{ 'Supercalifragilisticexpialidocious word'|wordwrap(10, false) }}",
    "{{ 'first para\\nsecond paragraph is longer\\n\\nthird'|wordwrap(8) }}|{{ 'a-b-c-d well-known-x ab--cd e.--f'|wordwrap(3) }}|{{ ''|wordwrap(5) }}",
    "{{ '  lead  and   trail  '|wordwrap(6) }}|{{ 'tab\\there  x'|wordwrap(4) }}|{{ 'über-größe wörter-liste'|wordwrap(7) }}",
    "{{ 'abc'|wordwrap(0) }}",
    "{{ 'one\\u2028two three\\u0085four\\u2029five'|wordwrap(5) }}|{{ 'a\\u2028b\\u0085c'|indent(2, true) }}|{{ 'x\\r\\ny\\rz'|wordwrap(3, wrapstring='|') }}",
    // wordcount, filesizeformat
    "{{ words|wordcount }} {{ ''|wordcount }} {{ 'héllo wörld_x 42 ß'|wordcount }} {{ 'a-b c.d e_f'|wordcount }} {{ 123|wordcount }}",
    "{{ 0|filesizeformat }}|{{ 1|filesizeformat }}|{{ 999|filesizeformat }}|{{ 1000|filesizeformat }}|{{ 123456789|filesizeformat }}|{{ 1e30|filesizeformat }}",
    "{{ 1024|filesizeformat(true) }}|{{ 1536.7|filesizeformat(binary=true) }}|{{ '2048'|filesizeformat }}|{{ -5|filesizeformat }}|{{ 1.0|filesizeformat }}|{{ true|filesizeformat }}",
    "{{ 'lots'|filesizeformat }}",
    // format (printf-style)
    "{{ '%s, %s!'|format('Hello', 'World') }}|{{ '%d items at %.2f'|format(3, 2.5) }}|{{ '%5s|%-5s|%05d|%+d|%x|%X|%o'|format('ab', 'cd', 42, 7, 255, 255, 8) }}",
    "{{ '%(name)s is %(age)d'|format(name='Bob', age=31.9) }}|{{ '%r %s %%'|format('q', none) }}|{{ '%.3s|%c|%c'|format('abcdef', 65, 'z') }}|{{ '%e %g %G'|format(12345.678, 0.00001, 1e20) }}",
    "{{ '%s'|format() }}",
    "{{ '%s'|format(1, 2) }}",
    "{{ '%d'|format('x') }}",
    "{{ '%s %s'|format(1, x=2) }}",
    // striptags, forceescape, escape
    "{{ '<p>Hello   <b>World</b></p>\\n<!-- c <i>x</i> -->  done &amp; &lt;ok&gt; &#65;&#x42;'|striptags }}|{{ '  a  \\n b '|striptags }}|{{ 'a < b'|striptags }}",
    "{{ '<b>&</b>'|forceescape }}|{{ '<b>'|safe|forceescape }}|{{ ('<b>'|forceescape) is escaped }}|{{ 'x' is escaped }}|{{ 'x'|safe is escaped }}",
    // urlencode, urlize, xmlattr
    "{{ 'a b/c?d=é&f'|urlencode }}|{{ {'q': 'a b', 'x': 1, 'z': none}|urlencode }}|{{ [['k', 'v w'], ['é', '/']]|urlencode }}|{{ 42|urlencode }}",
    "{{ 'see https://example.com/a?b=c, or www.test.org. (http://x.io/p) mail bob@example.com or mailto:a@b.cc; not a.b'|urlize }}",
    "{{ 'go to example.com and https://example.com/very/long/path/here'|urlize(15, true, target='_blank') }}|{{ 'ftp://files.x.org/f and irc:chan'|urlize(extra_schemes=['ftp://', 'irc:']) }}",
    "{{ 'x <http://a.bc/d> &lt;y&gt; 1.2.3.4 http://1.2.3.4:80/x http://[::1]/'|urlize(rel='me') }}",
    "{{ {'class': 'my list', 'id': 'x<1>', 'missing': none, 'n': 3}|xmlattr }}|{{ {'a': 'b'}|xmlattr(false) }}|{{ {}|xmlattr }}|",
    "{{ {'bad key': 1}|xmlattr }}",
    // pprint
    "{{ nested|pprint }}",
    "{{ {'b': 1, 'a': [1, 2, {'z': 1, 'y': 'x'}]}|pprint }}|{{ 'text'|pprint }}|{{ (1,)|pprint }}|{{ none|pprint }}|{{ [1.5, true]|pprint }}",
    "{{ long|pprint }}|{{ [long, long]|pprint }}|{{ {'key': long}|pprint }}",
    "{{ users|pprint }}",
    // the rest of the filters on new inputs, keyword arguments included
    "{{ 'x'|attr('upper') is callable }}|{{ -3.5|abs }}|{{ 'hELLO wORLD'|capitalize }}|{{ users|count }}|{{ none|d('n') }}|{{ ''|default('e', boolean=true) }}",
    "{{ '<&>'|e }}|{{ '<&>'|escape|length }}|{{ users|first }}|{{ users|last }}|{{ '3.5e2'|float }}|{{ 'x'|float(default=1.5) }}",
    "{{ 'line1\\nline2\\n\\nline4'|indent(width='> ', first=true, blank=true) }}|{{ '0x1A'|int(0, 16) }}|{{ '12.7'|int }}|{{ 'z'|int(default=-1) }}",
    "{{ props|items|list|length }}|{{ users|join(', ', attribute='name') }}|{{ users|map(attribute='city', default='?')|join(',') }}",
    "{{ 'AbC'|lower }}|{{ users|map(attribute='age')|select('odd')|list }}|{{ users|reject('none')|list|length }}|{{ users|rejectattr('age', 'gt', 30)|map(attribute='name')|list }}",
    "{{ 'aaa'|replace('a', 'bb', count=2) }}|{{ users|reverse|map(attribute='name')|first }}|{{ 2.675|round(2) }}|{{ 2.5|round }}|{{ 5|round }}|{{ 25|round(-1) }}|{{ 1234.5|round(-2) }}|{{ 560.0|round(-3) }}|{{ -0.4|round }}|{{ 9.99|round(1) }}|{{ 96.0|round(-1) }}|{{ 94.9|round(-1) }}|{{ 0.05|round(-1) }}|{{ 55.0|round(-2) }}|{{ 45.0|round(-1) }}|{{ 3.14159|round(3, 'floor') }}|{{ 3.1|round(method='ceil') }}",
    "{{ users|selectattr('tags')|map(attribute='name')|list }}|{{ users|selectattr('age', 'divisibleby', 7)|list|length }}|{{ [1, 2]|string }}",
    "{{ users|sum(attribute='age') }}|{{ [[1], [2]]|sum(start=[]) }}|{{ 'the quick-brown fox'|title }}|{{ nested|tojson }}|{{ '  x  '|trim }}|{{ '--x--'|trim('-') }}",
    "{{ ['a', 'A', 'b']|unique|list }}|{{ ['a', 'A', 'b']|unique(case_sensitive=true)|list }}|{{ users|unique(attribute='city')|map(attribute='name')|list }}|{{ 'shout'|upper }}",
    // case mappings beyond ASCII (Unicode's full mappings, as Python's str methods)
    "{{ 'ÉTÉ ΣΑΣ İ'|lower }}|{{ 'straße ǆ'|upper }}|{{ 'ǆemal ÉCOLE'|capitalize }}|{{ 'élan-vital über(alles) ǆx'|title }}|{{ 'Été'.lower() }}{{ 'ß'.upper() }}",
    "{{ 'é' is lower }}{{ 'É' is upper }}{{ '123' is lower }}{{ '123' is upper }}{{ 42 is lower }}{{ 'aB' is lower }}{{ 'ǅ' is upper }}{{ 'ǅ' is lower }}{{ none is upper }}",
    "{% for k, v in {'éclair': 1, 'Zebra': 2, 'apple': 3, 'Émile': 4}|dictsort %}{{ k }} {% endfor %}|{{ ['b', 'É', 'a', 'é']|sort }}|{{ ['É', 'é', 'e']|unique|list }}",
    // tests, aliases included
    "{{ 1 is boolean }}{{ true is boolean }}{{ range is callable }}{{ x is defined }}{{ 6 is divisibleby(3) }}{{ 1 is eq(1) }}{{ 'a' is equalto 'a' }}{{ 4 is even }}",
    "{{ false is false }}{{ 0 is false }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 1.0 is float }}{{ 3 is ge 3 }}{{ 3 is greaterthan 2 }}{{ 3 is gt 3 }}{{ 2 is in [1, 2] }}",
    "{{ 1 is integer }}{{ users is iterable }}{{ 3 is le 2 }}{{ 1 is lessthan 2 }}{{ 'abc' is lower }}{{ 1 is lt 2 }}{{ props is mapping }}{{ 1 is ne 2 }}{{ none is none }}",
    "{{ 1.5 is number }}{{ 3 is odd }}{{ none is sameas none }}{{ 'ab' is sequence }}{{ 'ab' is string }}{{ 'odd' is test }}{{ 'nope' is test }}{{ true is true }}{{ x is undefined }}{{ 'ABC' is upper }}",
    "{{ [1, 2, 3]|select('==', 2)|list }}{{ [1, 2, 3]|select('!=', 2)|list }}{{ [1, 2, 3]|select('<', 2)|list }}{{ [1, 2, 3]|select('<=', 2)|list }}{{ [1, 2, 3]|reject('>', 2)|list }}{{ [1, 2, 3]|reject('>=', 2)|list }}{{ (1, 2) is filter }}{{ users|select('mapping')|list|length }}",
    "{{ [1] is filter }}",
};

TEST(JinjaFiltersTest, EveryBuiltinFilterAndTestRendersAsPythonJinja2) {
  std::vector<jinja_test::PeerCase> cases;
  for (const char* source : kCases) cases.push_back({source, Context()});
  // Both sides know every name: `is filter` / `is test` answers True for each.
  std::string names = "{% for n in filters %}{{ n }}={{ n is filter }} {% endfor %}|{% for n in tests %}{{ n }}={{ n is test }} {% endfor %}";
  json::array filters, tests;
  for (const char* name : kFilterNames) filters.emplace_back(name);
  for (const char* name : kTestNames) tests.emplace_back(name);
  cases.push_back({names, json::object{{"filters", filters}, {"tests", tests}}});

  const auto expected = jinja_test::RenderWithPython(cases);
  ASSERT_EQ(expected.size(), cases.size()) << "python3 with jinja2 did not run (" << SINEW_PYTHON3 << ")";
  int same_text = 0, both_raised = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].source);
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(cases[i].source);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    Result<std::string> ours = parsed->Render(cases[i].context, std::chrono::system_clock::from_time_t(cases[i].now));
    if (expected[i].ok) {
      ASSERT_TRUE(ours.ok()) << "we failed: " << ours.status().ToString() << "\nPython: " << expected[i].text;
      EXPECT_EQ(*ours, expected[i].text);
      same_text += *ours == expected[i].text ? 1 : 0;
    } else {
      EXPECT_FALSE(ours.ok()) << "Python raised " << expected[i].text << " but we rendered:\n" << *ours;
      if (!ours.ok() && std::getenv("SINEW_JINJA_PEER_VERBOSE") != nullptr) {
        std::printf("both raised: %s\n  python: %s\n  ours:   %s\n", cases[i].source.c_str(), expected[i].text.c_str(),
                    ours.status().message().c_str());
      }
      both_raised += ours.ok() ? 0 : 1;
    }
  }
  EXPECT_EQ(expected.back().text.find("False"), std::string::npos) << "Python lacks a name: " << expected.back().text;
  std::printf("jinja filters: %zu cases, %d same text, %d raised on both sides\n", cases.size(), same_text, both_raised);
}

// random gives an item of its input (or Undefined for an empty one), as Python's does.
TEST(JinjaFiltersTest, RandomGivesAnItemOfItsInput) {
  const std::string source = "{% for i in range(200) %}{{ [10, 20, 30, 40]|random }},{% endfor %}|{{ 'xyz'|random }}|{{ []|random }}|";
  Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  Result<std::string> ours = parsed->Render({});
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  const auto python = jinja_test::RenderWithPython({{source, {}}});
  ASSERT_EQ(python.size(), 1u);
  ASSERT_TRUE(python[0].ok) << python[0].text;
  for (const std::string* text : {static_cast<const std::string*>(&*ours), &python[0].text}) {
    std::set<std::string> seen;
    const std::string picks = text->substr(0, text->find('|'));
    for (size_t start = 0; start < picks.size();) {
      const size_t comma = picks.find(',', start);
      seen.insert(picks.substr(start, comma - start));
      start = comma + 1;
    }
    for (const std::string& pick : seen) EXPECT_TRUE(pick == "10" || pick == "20" || pick == "30" || pick == "40") << pick;
    EXPECT_GT(seen.size(), 1u) << "200 picks from 4 items were all the same: " << *text;
    const std::string rest = text->substr(text->find('|'));
    EXPECT_TRUE(rest == "|x||" || rest == "|y||" || rest == "|z||") << rest;
  }
  Result<JinjaTemplate> not_a_sequence = JinjaTemplate::Parse("{{ 5|random }}");
  ASSERT_TRUE(not_a_sequence.ok());
  EXPECT_FALSE(not_a_sequence->Render({}).ok());
}

// Filters that make text or lists from a width or count stop at the render's bounds
// with a message instead of allocating what they are asked for.
TEST(JinjaFiltersTest, WidthsAndCountsStopAtTheRenderersBounds) {
  RenderBounds small;
  small.max_text_bytes = 1 << 20;
  small.max_items = 10'000;
  const std::pair<const char*, const char*> runaway[] = {
      {"{{ 'x'|center(100000000000) }}", "bytes is past the renderer's bound"},
      {"{{ 'a\\nb'|indent(100000000000) }}", "bytes is past the renderer's bound"},
      {"{{ ('x\\n' * 1000)|indent(2000) }}", "bytes is past the renderer's bound"},
      {"{{ [1]|batch(100000000000, 0)|list }}", "items is past the renderer's bound"},
      {"{{ [1]|slice(100000000000)|list }}", "items is past the renderer's bound"},
      {"{{ ('a b ' * 1000)|wordwrap(1, wrapstring='x' * 1000) }}", "bytes is past the renderer's bound"},
      {"{{ '%100000000000s'|format('x') }}", "bytes is past the renderer's bound"},
      {"{{ '%.100000000000f'|format(1.5) }}", "bytes is past the renderer's bound"},
      {"{{ ('a ' * 100000)|list|pprint }}", "bytes is past the renderer's bound"},
      // Python's algorithms copy the rest of the text per tag / per piece: quadratic.
      {"{{ ('<b>' * 300000)|striptags }}", "striptags: the input needs too much copying"},
      {"{{ ('x' * 1000000)|wordwrap(1) }}", "wordwrap: the input needs too much copying"},
  };
  for (const auto& [source, message] : runaway) {
    Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
    ASSERT_TRUE(parsed.ok()) << source << ": " << parsed.status().ToString();
    auto rendered = parsed->Render({}, std::chrono::system_clock::now(), small);
    ASSERT_FALSE(rendered.ok()) << source;
    EXPECT_NE(rendered.status().message().find(message), std::string::npos) << source << ": " << rendered.status().message();
  }
}

// Real chat templates list a tool's parameters with dictsort (e.g. "for name, spec in
// tool.parameters.properties|dictsort"): such a template parses and renders as Python.
TEST(JinjaFiltersTest, ChatTemplateUsingDictsortRendersAsPython) {
  const std::string source =
      "{%- for tool in tools %}{{ tool.function.name }}(\n"
      "{%- for name, spec in tool.function.parameters.properties|dictsort %}\n"
      "  {{ name }}: {{ spec.type }}{% if name in tool.function.parameters.required %} (required){% endif %}\n"
      "{%- endfor %})\n{% endfor %}"
      "{%- for message in messages %}<|{{ message.role }}|>{{ message.content }}\n{% endfor %}"
      "{%- if add_generation_prompt %}<|assistant|>{% endif %}";
  const json::object context = json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"unit": {"type": "string"}, "city": {"type": "string"}, "Days": {"type": "integer"}},
      "required": ["city"]}}}],
    "messages": [{"role": "user", "content": "Weather?"}], "add_generation_prompt": true})").as_object();
  Result<JinjaTemplate> parsed = JinjaTemplate::Parse(source);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  Result<std::string> ours = parsed->Render(context);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  const auto python = jinja_test::RenderWithPython({{source, context}});
  ASSERT_EQ(python.size(), 1u);
  ASSERT_TRUE(python[0].ok) << python[0].text;
  EXPECT_EQ(*ours, python[0].text);
  EXPECT_NE(ours->find("get_weather(  city: string (required)  Days: integer  unit: string)"), std::string::npos) << *ours;
}

}  // namespace
}  // namespace sinew::model

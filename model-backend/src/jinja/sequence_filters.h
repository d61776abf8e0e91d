// Jinja2's filters over sequences and mappings: unique, sort, dictsort, groupby, batch,
// slice, min, max, random, sum, select, reject, selectattr, rejectattr and map. Each gives
// what its Python counterpart (Jinja2 3.1 under ImmutableSandboxedEnvironment) gives, and
// throws JinjaError where Python raises.
#pragma once

#include "value.h"

namespace sinew::jinja {

Value FilterUnique(const Value& v, const CallArgs& args);      // (case_sensitive=false, attribute)
Value FilterSort(const Value& v, const CallArgs& args);        // (reverse, case_sensitive, attribute)
Value FilterDictsort(const Value& v, const CallArgs& args);    // (case_sensitive, by="key", reverse)
Value FilterGroupby(const Value& v, const CallArgs& args);     // (attribute, default, case_sensitive)
Value FilterBatch(const Value& v, const CallArgs& args);       // (linecount, fill_with)
Value FilterSlice(const Value& v, const CallArgs& args);       // (slices, fill_with)
Value FilterMin(const Value& v, const CallArgs& args);         // (case_sensitive, attribute)
Value FilterMax(const Value& v, const CallArgs& args);         // (case_sensitive, attribute)
Value FilterRandom(const Value& v, const CallArgs& args);
Value FilterSum(const Value& v, const CallArgs& args);         // (attribute, start=0)
Value FilterSelect(const Value& v, const CallArgs& args);      // (test, *args)
Value FilterReject(const Value& v, const CallArgs& args);      // (test, *args)
Value FilterSelectAttr(const Value& v, const CallArgs& args);  // (attribute, test, *args)
Value FilterRejectAttr(const Value& v, const CallArgs& args);  // (attribute, test, *args)
Value FilterMap(const Value& v, const CallArgs& args);         // (filter, *args) or (attribute=, default=)

}  // namespace sinew::jinja

package api

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/paygate/gateway/transport/apierr"
)

// Decode strictly decodes a request body into v, which must be a non-nil
// pointer to one of the request structs of this package.
//
//   - An empty or whitespace-only body, a top-level value that is not a JSON
//     object, malformed JSON, invalid UTF-8 (including lone surrogate
//     escapes), a duplicate object key at any depth, or trailing data after
//     the object: 400, code 2.07 (apierr.BadBody), attribute "body".
//   - A value of the wrong JSON type for a known field (amount "abc" or 10.5,
//     customer given as a string, ...): 422, code 2.01 (apierr.Invalid), with
//     the field's dotted path as the attribute ("customer.email").
//   - Unknown members are ignored (forward compatibility, interface 9.2).
//     Member names match case-sensitively, so "Amount" is an unknown member.
//   - JSON null for any field leaves it absent (nil).
//
// Syntax problems take precedence over type problems: a body with both gets
// the 400. No half results: on failure *v is left exactly as it was; on
// success it is replaced (not merged) by the decoded value.
func Decode(body []byte, v any) *apierr.Error {
	err, _ := decode(body, v, false)
	return err
}

// decode is Decode, which also returns where a type error is (the member
// of the wrong type), or nil for any other answer. inPlace decodes into *v
// itself, zeroed first, instead of into a fresh value copied over it: for a
// caller that owns *v and drops it on failure (Parse), so a half result
// cannot be seen, and saves a second value per request.
func decode(body []byte, v any, inPlace bool) (*apierr.Error, *json.SemanticError) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		// Programming error in the caller, never the merchant's fault.
		return apierr.New(apierr.Internal, "body", "internal error"), nil
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return apierr.New(apierr.BadBody, "body", "body is empty"), nil
	}
	if trimmed[0] != '{' {
		return errNotObject(), nil
	}

	var err error
	if inPlace {
		rv.Elem().SetZero() // Unmarshal merges into what is there
		err = json.Unmarshal(body, v)
	} else {
		fresh := reflect.New(rv.Elem().Type())
		if err = json.Unmarshal(body, fresh.Interface()); err == nil {
			rv.Elem().Set(fresh.Elem())
		}
	}
	if err == nil {
		return nil, nil
	}

	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		return syntaxError(synErr), nil
	}
	// Unmarshal stops at the first type error, before it has seen the rest
	// of the body: check the whole body's syntax so that a malformed body is
	// always a 400, whatever comes first.
	if serr := checkSyntax(body); serr != nil {
		return serr, nil
	}
	var semErr *json.SemanticError
	if errors.As(err, &semErr) {
		terr := typeError(semErr)
		if terr.Code != apierr.Invalid { // the top level is not an object
			return terr, nil
		}
		return terr, semErr
	}
	return apierr.New(apierr.BadBody, "body", "body is not valid JSON"), nil
}

// Each member of the wrong type that an answer lists costs another decode
// of the body (and a re-encoding of it with the member as null). Both the
// count and the bytes decoded in all are bounded: 32 members of a 1 KB
// body are cheap, 32 of a 1 MiB body were ~700 times the work of decoding
// a valid one, which any merchant could ask for at its rate limit.
const (
	maxTypeErrors        = 32
	typeErrorDecodeBytes = 2 << 20
)

// Parse decodes body into a new R and validates it, and lists every
// violation at once (contract section 3, 422 2.01: "every violating field
// is listed"). A member of the wrong JSON type does not hide the others:
// it is reported, decoded again as absent (null), and validation runs on
// the rest; the validator's messages for a member already reported as of
// the wrong type (or inside it) are left out ("customer is required" after
// "customer should be an object"). Syntax errors are answered alone, as by
// Decode.
func Parse[R any](body []byte, validate func(*R) *apierr.Error) (*R, *apierr.Error) {
	req := new(R)
	if err := ParseInto(body, req, validate); err != nil {
		return nil, err
	}
	return req, nil
}

// ParseInto is Parse into *req, for a caller that allocates the request
// along with something else. *req is replaced; on failure it may be left
// half decoded, and the caller drops it.
func ParseInto[R any](body []byte, req *R, validate func(*R) *apierr.Error) *apierr.Error {
	typeErrs, err := decodeCollecting(body, req)
	if err != nil {
		return err
	}
	verr := validate(req)
	switch {
	case typeErrs == nil && verr == nil:
		return nil
	case typeErrs == nil:
		return verr
	}
	if verr != nil {
		for _, attr := range verr.Attributes() {
			if !coveredBy(attr, typeErrs) {
				for _, m := range verr.Messages[attr] {
					typeErrs.Add(attr, m)
				}
			}
		}
	}
	return typeErrs
}

// coveredBy reports whether attr is, is inside, or holds an attribute of e.
// A member of the wrong type was decoded as null, so what the validator says
// of it, of its members and of what holds it ("must not contain an empty
// signature" for a list whose element was a number) is about that null.
func coveredBy(attr string, e *apierr.Error) bool {
	for a := range e.Messages {
		if attr == a || strings.HasPrefix(attr, a+".") || strings.HasPrefix(a, attr+".") {
			return true
		}
	}
	return false
}

// decodeCollecting decodes body into v like Decode, except that a member
// of the wrong type is reported and decoded as null, up to maxTypeErrors
// members and typeErrorDecodeBytes decoded, and that *v is left half
// decoded on failure: the caller owns it and drops it then.
// It returns those type errors (nil if none) or an error that ends the
// request (a syntax error, a top level that is not an object).
func decodeCollecting(body []byte, v any) (typeErrs, fatal *apierr.Error) {
	decoded := 0
	for range maxTypeErrors {
		if typeErrs != nil && decoded+len(body) > typeErrorDecodeBytes {
			break
		}
		decoded += len(body)
		err, semErr := decode(body, v, true)
		if err == nil {
			return typeErrs, nil
		}
		if semErr == nil {
			return nil, err
		}
		if typeErrs == nil {
			typeErrs = &apierr.Error{Code: apierr.Invalid}
		}
		for _, attr := range err.Attributes() {
			for _, m := range err.Messages[attr] {
				typeErrs.Add(attr, m)
			}
		}
		next, ok := withNull(body, semErr.JSONPointer)
		if !ok {
			break
		}
		body = next
	}
	// Past a bound, or a member that could not be set to null: what is
	// listed is the answer, without validating a request that still holds
	// a member of the wrong type.
	return nil, typeErrs
}

// withNull returns the JSON document doc with the value at ptr replaced by
// null. Members keep their raw values (numbers stay exact); their order
// may change, which decoding into a struct does not see.
func withNull(doc jsontext.Value, ptr jsontext.Pointer) (jsontext.Value, bool) {
	var path []string
	for tok := range ptr.Tokens() {
		path = append(path, tok)
	}
	if len(path) == 0 {
		return nil, false
	}
	return nullIn(doc, path)
}

func nullIn(v jsontext.Value, path []string) (jsontext.Value, bool) {
	replace := func(child jsontext.Value) (jsontext.Value, bool) {
		if len(path) == 1 {
			return jsontext.Value("null"), true
		}
		return nullIn(child, path[1:])
	}
	switch v.Kind() {
	case '{':
		var m map[string]jsontext.Value
		if json.Unmarshal(v, &m) != nil {
			return nil, false
		}
		child, ok := m[path[0]]
		if !ok {
			return nil, false
		}
		if m[path[0]], ok = replace(child); !ok {
			return nil, false
		}
		out, err := json.Marshal(m)
		return out, err == nil
	case '[':
		var a []jsontext.Value
		i, err := strconv.Atoi(path[0])
		if json.Unmarshal(v, &a) != nil || err != nil || i < 0 || i >= len(a) {
			return nil, false
		}
		var ok bool
		if a[i], ok = replace(a[i]); !ok {
			return nil, false
		}
		out, err := json.Marshal(a)
		return out, err == nil
	}
	return nil, false
}

// checkSyntax reads the whole body as one JSON value followed by the end of
// input, with the same strictness as Unmarshal (duplicate names and invalid
// UTF-8 refused).
func checkSyntax(body []byte) *apierr.Error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	err := dec.SkipValue()
	if err == nil {
		if _, err = dec.ReadToken(); err == io.EOF {
			return nil
		}
	}
	var synErr *jsontext.SyntacticError
	if errors.As(err, &synErr) {
		return syntaxError(synErr)
	}
	if err == nil || err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return apierr.New(apierr.BadBody, "body", "body is not valid JSON: it ends too early")
	}
	return apierr.New(apierr.BadBody, "body", "body is not valid JSON")
}

func syntaxError(e *jsontext.SyntacticError) *apierr.Error {
	switch {
	case errors.Is(e.Err, jsontext.ErrDuplicateName):
		return apierr.New(apierr.BadBody, "body", "body has a duplicate key "+strconv.Quote(shorten(dottedPath(e.JSONPointer))))
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return apierr.New(apierr.BadBody, "body", "body is not valid JSON: it ends too early")
	case e.Err != nil && strings.Contains(e.Err.Error(), "invalid UTF-8"):
		return apierr.New(apierr.BadBody, "body", "body is not valid UTF-8")
	case e.Err != nil && strings.Contains(e.Err.Error(), "surrogate"):
		return apierr.New(apierr.BadBody, "body", "body has a string with an invalid \\u escape (lone surrogate)")
	case e.Err != nil && strings.Contains(e.Err.Error(), "after top-level value"):
		return apierr.New(apierr.BadBody, "body", "body must contain a single JSON object and nothing after it")
	}
	return apierr.New(apierr.BadBody, "body", "body is not valid JSON (error at byte "+strconv.FormatInt(e.ByteOffset, 10)+")")
}

// errNotObject is the answer to a body that is not a JSON object (null, an
// array, a string, ...), at decode time or when a validator gets nil.
func errNotObject() *apierr.Error {
	return apierr.New(apierr.BadBody, "body", "body must be a JSON object")
}

func typeError(e *json.SemanticError) *apierr.Error {
	attr := dottedPath(e.JSONPointer)
	if attr == "" {
		return errNotObject()
	}
	t := e.GoType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var msg string
	switch {
	case t == nil:
		msg = attr + " has the wrong type"
	case t == reflect.TypeFor[jsontext.Value]():
		msg = attr + " is not a valid JSON value"
	default:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if e.JSONKind == '0' && isPlainInteger(string(e.JSONValue)) {
				msg = attr + " is out of range"
			} else {
				msg = attr + " should be an integer"
			}
		case reflect.String:
			msg = attr + " should be a string"
		case reflect.Bool:
			msg = attr + " should be a boolean (true or false)"
		case reflect.Struct, reflect.Map:
			msg = attr + " should be an object"
		case reflect.Slice, reflect.Array:
			msg = attr + " should be an array"
		default:
			msg = attr + " has the wrong type"
		}
	}
	return apierr.New(apierr.Invalid, attr, msg)
}

// isPlainInteger reports whether s is a JSON number without fraction or
// exponent (so a failure to decode it into an integer is a range problem).
func isPlainInteger(s string) bool {
	return allDigits(strings.TrimPrefix(s, "-"))
}

// dottedPath turns the JSON pointer "/customer/email" into "customer.email".
func dottedPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// shorten keeps an echoed merchant-supplied name to a readable length.
func shorten(s string) string {
	const max = 100
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "..."
}

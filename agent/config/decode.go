package config

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Pos is a position in a config file. A struct with a Pos field gets the
// position of its YAML mapping there; the positions of its fields' values
// are in its Config (Config.at).
type Pos struct {
	Line, Col int
}

// positions are where a file gave the values of fields, by the address of
// the field (such as &b.URL, a *string), and of the items of lists and
// mappings (entry). They stay out of the structs, whose Pos is comparable.
type positions map[any]Pos

// entry names an item of the list or mapping at a field's address: by
// index in the list, by key in the mapping.
type entry struct {
	field any
	key   any
}

// verbatim names the first character of a field's value (or of a string
// of a mapping's, by its entry) when its line in the file holds the value
// as it is (no escapes, no ${VAR}): a column inside the value is then a
// column of the file.
type verbatim struct{ field any }

// undecoded is the key under which positions note a field whose value did
// not decode: it has its error, and is left to its default for the rest
// of the checks, which must not find fault with it again.
type undecoded struct{ field any }

// Error is one problem in a config file, at a position.
type Error struct {
	File string
	Pos
	Msg string
}

func (e Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// Errors are every problem found in a file, in file order.
type Errors []Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// decoder fills Go structs from YAML nodes, collecting every error with its
// position instead of stopping at the first. Struct fields are named by
// their `yaml` tag; a tag option ",required" makes a field mandatory; the
// fields of an embedded struct are the struct's own (fileFields).
type decoder struct {
	file   string
	errs   Errors
	lookup func(string) (string, bool) // environment for ${VAR}
	lines  []string                    // the file, for verbatim
	at     positions
	env    fromEnv

	// What the file's values cost so far (spend), and whether that
	// stopped the decoding; dropped, that the string just decoded was
	// over maxStringBytes and is not kept in its list or mapping.
	values, scalarBytes int
	exhausted, dropped  bool
	// The byte offset of each character of line offsetsOf, when it holds
	// more than ASCII (noteVerbatim's).
	offsetsOf int
	offsets   []int

	// shape counts the errors that say a value is in the wrong place
	// (shapef's); keyLine is a line whose key dedented's fits wants
	// read as a field's or an entry's of a mapping of sections (not of
	// strings, which takes any key), keyFound whether it was.
	shape    int
	keyLine  int
	keyFound bool
}

// note records where n, the value of the field or item at key, is, and
// its text if it takes something from the environment.
func (d *decoder) note(key any, n *yaml.Node) {
	d.at[key] = Pos{n.Line, n.Column}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && envRef.MatchString(n.Value) {
		d.env[key] = n.Value
	}
}

// noteVerbatim records where the string s decoded from n starts, if the
// file holds it as it is on one line: plain, or quoted without escapes.
func (d *decoder) noteVerbatim(field any, n *yaml.Node, s string) {
	if n.Line < 1 || n.Line > len(d.lines) || n.Column < 1 || strings.ContainsAny(s, "\n\r") {
		return
	}
	var quote string
	switch n.Style {
	case 0:
	case yaml.SingleQuotedStyle:
		quote = "'"
	case yaml.DoubleQuotedStyle:
		quote = `"`
	default:
		return
	}
	line := d.lines[n.Line-1]
	at, ok := d.offset(n.Line, n.Column)
	if !ok || !strings.HasPrefix(line[at:], quote+s+quote) {
		return // escapes, ${VAR}, a tag, or lines yaml counts otherwise
	}
	d.at[verbatim{field}] = Pos{n.Line, n.Column + len(quote)}
}

// offset returns the byte offset in the file's line l of its character at
// col (both from 1, as yaml.v3 counts them): the line's end for the
// column after its last character, and false beyond that. It costs a
// line's length once, however many values the line holds.
func (d *decoder) offset(l, col int) (int, bool) {
	line := d.lines[l-1]
	if d.offsetsOf != l {
		d.offsetsOf, d.offsets = l, nil
		if !isASCII(line) {
			d.offsets = make([]int, 0, len(line))
			for i := range line {
				d.offsets = append(d.offsets, i)
			}
		}
	}
	switch {
	case d.offsets == nil && col-1 <= len(line):
		return col - 1, true
	case d.offsets == nil || col-1 > len(d.offsets):
		return 0, false
	case col-1 == len(d.offsets):
		return len(line), true
	}
	return d.offsets[col-1], true
}

// isASCII reports whether s holds ASCII only.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errs = append(d.errs, Error{File: d.file, Pos: Pos{n.Line, n.Column}, Msg: fmt.Sprintf(format, args...)})
}

// shapef is errorf for an error that says a value is in the wrong place
// (an unknown or missing field, a mapping where a list belongs): the
// mark of a line indented less than it should be (dedented).
func (d *decoder) shapef(n *yaml.Node, format string, args ...any) {
	d.shape++
	d.errorf(n, format, args...)
}

// Strings are a list of strings that a file may also give as one string
// alone, the list of it: `key_by: device` is `key_by: [device]`.
type Strings []string

var (
	durationType = reflect.TypeOf(time.Duration(0))
	stringsType  = reflect.TypeOf(Strings(nil))
	posType      = reflect.TypeOf(Pos{})
	// envRef is a reference to the environment: ${VAR}, or
	// ${VAR:-default}, whose default (up to the first }) stands in when
	// VAR is unset or empty.
	envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)
)

// RefersToEnv reports whether s, a value as a pipeline file writes it,
// takes something from the environment (${VAR} or ${VAR:-default}).
func RefersToEnv(s string) bool { return envRef.MatchString(s) }

// scalar returns n's value after ${VAR} substitution: the variable's
// value, else the reference's default, else an error (the variable is
// not set). A lookup may answer ${VAR} for VAR to leave a reference
// without a default as the file writes it (the lenient parses); one with
// a default takes its default then, as the agent would.
// It counts the value's bytes against the file's bounds (spend): "" once
// they are crossed.
func (d *decoder) scalar(n *yaml.Node) string {
	s := envRef.ReplaceAllStringFunc(n.Value, func(ref string) string {
		m := envRef.FindStringSubmatch(ref)
		name, def := m[1], m[2]
		v, ok := d.lookup(name)
		switch {
		case def != "" && (!ok || v == "" || v == "${"+name+"}"):
			return def[len(":-"):]
		case !ok:
			d.errorf(n, "environment variable %s is not set", name)
		}
		return v
	})
	if !d.spend(n, 0, len(s)) {
		return ""
	}
	return s
}

func isNull(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return written(n.Value) // before ${VAR} substitution
	}
	return "something else"
}

// decode fills v (addressable) from n.
func (d *decoder) decode(n *yaml.Node, v reflect.Value) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		return // leave the zero value
	}
	if !d.spend(n, 1, 0) {
		return
	}
	switch {
	case v.Type() == stringsType && n.Kind == yaml.ScalarNode:
		// One string alone, the list of it.
		d.decode(&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{n}, Line: n.Line, Column: n.Column}, v)
		return
	case v.Type() == durationType:
		s := d.scalar(n)
		dur, err := time.ParseDuration(s)
		if n.Kind != yaml.ScalarNode || err != nil || dur < 0 {
			d.errorf(n, "want a duration such as 500ms or 10s, not %s", kindName(n))
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.Struct && n.Kind != yaml.MappingNode {
			// Left nil, and dropped from a list or mapping: a section
			// that is not one must not also fail the checks of an empty
			// one, at no position.
			d.shapef(n, "want a mapping, not %s", kindName(n))
			return
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.decode(n, v.Elem())
	case reflect.Struct:
		d.decodeStruct(n, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.shapef(n, "want a list, not %s", kindName(n))
			return
		}
		items := d.entries(n, 1)
		s := reflect.MakeSlice(v.Type(), 0, len(items))
		for _, item := range items {
			if isNull(item) {
				d.shapef(item, "empty list entry")
				continue
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			d.dropped = false
			d.decode(item, elem)
			if elem.Kind() == reflect.Pointer && elem.IsNil() || elem.Kind() == reflect.String && d.dropped {
				continue
			}
			if v.CanAddr() {
				at := entry{v.Addr().Interface(), s.Len()}
				d.note(at, item)
				if elem.Kind() == reflect.String {
					d.noteVerbatim(at, item, elem.String())
				}
			}
			s = reflect.Append(s, elem)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.shapef(n, "want a mapping, not %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		content := d.entries(n, 2)
		for i := 0; i+1 < len(content); i += 2 {
			k, val := content[i], content[i+1]
			if !d.spend(k, 0, len(k.Value)) || d.overlong(k, k.Value) {
				continue
			}
			if k.Line == d.keyLine && v.Type().Elem().Kind() != reflect.String {
				d.keyFound = true // a name, such as a broker's: not free text
			}
			if isNull(val) {
				d.errorf(k, "%q is empty", k.Value)
				continue
			}
			if m.MapIndex(reflect.ValueOf(k.Value)).IsValid() {
				d.shapef(k, "key %q given twice", k.Value)
				continue
			}
			elem := reflect.New(v.Type().Elem()).Elem()
			d.dropped = false
			d.decode(val, elem)
			if elem.Kind() == reflect.Pointer && elem.IsNil() || elem.Kind() == reflect.String && d.dropped {
				continue
			}
			if v.CanAddr() {
				at := entry{v.Addr().Interface(), k.Value}
				d.note(at, val)
				if elem.Kind() == reflect.String {
					d.noteVerbatim(at, val, elem.String())
				}
			}
			m.SetMapIndex(reflect.ValueOf(k.Value), elem)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(n, "want a string, not %s", kindName(n))
			return
		}
		s := d.scalar(n)
		if d.overlong(n, s) {
			d.dropped = true
			return
		}
		v.SetString(s)
		if v.CanAddr() {
			d.noteVerbatim(v.Addr().Interface(), n, v.String())
		}
	case reflect.Bool:
		b, err := strconv.ParseBool(d.scalar(n))
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, "want true or false, not %s", kindName(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(d.scalar(n), 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, "want a whole number, not %s", kindName(n))
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(d.scalar(n), 64)
		if n.Kind != yaml.ScalarNode || err != nil {
			d.errorf(n, "want a number, not %s", kindName(n))
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("config: cannot decode into %s", v.Type()))
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.shapef(n, "want a mapping, not %s", kindName(n))
		return
	}
	t := v.Type()
	if p, ok := t.FieldByName("Pos"); ok && p.Type == posType {
		v.FieldByIndex(p.Index).Set(reflect.ValueOf(Pos{n.Line, n.Column}))
	}
	fields := make(map[string][]int)
	required := make(map[string]bool)
	var known []string
	for _, f := range fileFields(t) {
		fields[f.name] = f.Index
		known = append(known, f.name)
		if f.required {
			required[f.name] = true
		}
	}
	seen := make(map[string]bool)
	content := d.entries(n, 2)
	for i := 0; i+1 < len(content); i += 2 {
		k, val := content[i], content[i+1]
		if !d.spend(k, 0, len(k.Value)) {
			return
		}
		idx, ok := fields[k.Value]
		if !ok {
			d.shapef(k, "unknown field %q (known: %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		if k.Line == d.keyLine {
			d.keyFound = true
		}
		if seen[k.Value] {
			d.shapef(k, "field %q given twice", k.Value)
		}
		seen[k.Value] = true
		f := v.FieldByIndex(idx)
		errs := len(d.errs)
		if f.CanAddr() && !isNull(val) { // a null is left out, and takes the default
			d.note(f.Addr().Interface(), val)
		}
		d.decode(val, f)
		if f.CanAddr() && len(d.errs) > errs {
			d.at[undecoded{f.Addr().Interface()}] = Pos{val.Line, val.Column}
		}
	}
	for _, name := range known {
		if required[name] && !seen[name] {
			d.shapef(n, "missing required field %q", name)
		}
	}
}

// A fileField is a field of a struct that a file gives the value of.
type fileField struct {
	reflect.StructField
	name     string       // in the file, from its `yaml` tag
	required bool         // its tag says ",required"
	owner    reflect.Type // the struct that declares it
}

// fileFields returns the fields of struct type t that a file gives the
// values of: those with a name in their `yaml` tag, and in the place of a
// struct that t embeds without a name, that struct's (Operator's settings
// of each kind), as Go promotes them; Index is each one's in t. Pos, the
// mapping's position, is none of them.
func fileFields(t reflect.Type) []fileField {
	var out []fileField
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case f.Anonymous && name == "" && f.Type != posType && f.Type.Kind() == reflect.Struct:
			for _, g := range fileFields(f.Type) {
				g.Index = append([]int{i}, g.Index...)
				out = append(out, g)
			}
		case name != "" && name != "-":
			out = append(out, fileField{StructField: f, name: name, required: opts == "required", owner: t})
		}
	}
	return out
}

// parse decodes the YAML in data into v, reporting every problem, noting
// in at where the file gave each field's value and in env the text of
// those that took something from the environment. keyFound is whether
// line key (from 1) holds the key of a field (dedented's fits).
func parse(file string, data []byte, v any, lookup func(string) (string, bool), at positions, env fromEnv, key int) (errs Errors, keyFound bool) {
	if e, ok := tooLarge(file, data); ok {
		return Errors{e}, false
	}
	d := &decoder{file: file, lookup: lookup, lines: strings.Split(string(data), "\n"), at: at, env: env, keyLine: key}
	if bad := invalidUTF8(data); bad < len(data) {
		// yaml.v3 would read a UTF-16 file, but count its lines and
		// columns in the decoded text, not in the file as an editor shows
		// it; anything else is not text.
		line := 1 + bytes.Count(data[:bad], []byte("\n"))
		return Errors{{File: file, Pos: Pos{line, 1}, Msg: "not UTF-8 text: save the file as UTF-8"}}, false
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if p, msg, ok := syntaxError(d.lines, err.Error(), d.fitsLike(v)); ok {
			return Errors{{File: file, Pos: p, Msg: "not valid YAML: " + msg}}, false
		}
		line := 0
		if _, err2 := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); err2 != nil {
			line = 1
		}
		return Errors{{File: file, Pos: Pos{line, 1}, Msg: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}, false
	}
	if len(root.Content) == 0 || isNull(root.Content[0]) {
		return Errors{{File: file, Pos: Pos{1, 1}, Msg: "the file is empty"}}, false
	}
	d.decode(root.Content[0], reflect.ValueOf(v).Elem())
	return d.errs, d.keyFound
}

// invalidUTF8 returns the offset of the first byte of data that is not
// part of valid UTF-8, len(data) if there is none.
func invalidUTF8(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

// osLookup reads the environment.
func osLookup(name string) (string, bool) { return os.LookupEnv(name) }

package config

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/cairn-edge/cairn/broker"
	"github.com/cairn-edge/cairn/checkpoint"
	"github.com/cairn-edge/cairn/mqttio"
)

// everySection is a file with every section, and in them only what they
// need.
const everySection = `brokers:
  plant: {url: 'tcp://broker:1883'}
  local: {embedded: true, users: [{username: dev, password: pw}]}
sources:
  - {id: in, broker: plant, topics: [a/b]}
  - {id: sim, simulator: {devices: 1, rate: 1}}
operators:
  - {id: w, type: window, inputs: [sim], key_by: key, window: {kind: tumbling, size: 1s}, aggregate: avg}
sinks:
  - {id: out, input: w, broker: local, topic: out}
remote: {endpoint: 's3:9000', bucket: bkt, access_key: a, secret_key: s}
`

// TestDocumentedDefaults checks that a field the file leaves out has the
// default its `default` tag documents, and that one without a tag stays
// zero, but for the exceptions applyDefaults names, which its doc
// comment must state.
func TestDocumentedDefaults(t *testing.T) {
	c, errs := Parse("everySection.yaml", []byte(everySection), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	docs, err := fieldDocs()
	if err != nil {
		t.Fatal(err)
	}
	var check func(v reflect.Value, path string)
	check = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() { // else a section of another kind of source
				check(v.Elem(), path)
			}
			return
		case reflect.Slice:
			for i := range v.Len() {
				check(v.Index(i), path+"[]")
			}
			return
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				check(it.Value(), path+".<name>")
			}
			return
		}
		typ := v.Type()
		for _, f := range fileFields(typ) {
			fv := v.FieldByIndex(f.Index)
			p := strings.TrimPrefix(path+"."+f.name, ".")
			if _, section := describe(f.Type, nil); section != nil {
				check(fv, p)
				continue
			}
			if c.at(fv.Addr().Interface(), Pos{}) != (Pos{}) {
				continue // the file gives it
			}
			def, tagged := f.Tag.Lookup("default")
			if only := f.Tag.Get("defaultif"); only != "" && !v.FieldByName(only).Bool() {
				tagged = false
			}
			// An exception names what its doc comment must say.
			var want any
			says, exception := "`"+def+"`", ""
			switch key := f.owner.Name() + "." + f.Name; {
			case key == "Remote.Retained":
				want, exception = c.Checkpoints.Retained, "`checkpoints.retained`"
			case tagged:
				d := &decoder{lookup: env(nil)}
				w := reflect.New(f.Type).Elem()
				d.decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}, w)
				want = w.Interface()
			default:
				if !fv.IsZero() {
					t.Errorf("%s is %v when the file leaves it out, but has no `default` tag that documents it", p, fv.Interface())
				}
				continue
			}
			if exception != "" {
				says = exception
				if doc := docs[f.owner.Name()+"."+f.Name]; !strings.Contains(doc, exception) {
					t.Errorf("%s's doc comment does not say its default, %s: %q", p, exception, doc)
				}
			}
			if got := fv.Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("%s is %v when the file leaves it out; its default is documented as %v", p, reflect.Indirect(fv), says)
			}
		}
	}
	check(reflect.ValueOf(c).Elem(), "")
}

// TestDefaultsOfOtherPackages checks that the defaults of a pipeline file
// are those of the packages that take them, where those have their own.
func TestDefaultsOfOtherPackages(t *testing.T) {
	c, errs := Parse("everySection.yaml", []byte(everySection), env(nil))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	mode, _ := checkpoint.ParseMode(c.Checkpoints.Mode)
	cp := c.Checkpoints
	got := checkpoint.Config{Mode: mode, Interval: cp.Interval, MinPause: cp.MinPause, Timeout: cp.Timeout,
		MaxConcurrent: cp.MaxConcurrent, TolerableFailures: *cp.TolerableFailures, AlignmentTimeout: cp.AlignmentTimeout}
	if want := checkpoint.DefaultConfig(); got != want {
		t.Errorf("checkpoints: %+v, but checkpoint.DefaultConfig is %+v", got, want)
	}
	if got, want := c.Agent.SyncInterval, mqttio.DefaultSyncInterval; got != want {
		t.Errorf("agent.sync_interval: %v, but mqttio.DefaultSyncInterval is %v", got, want)
	}
	if got, want := c.Brokers["local"].Listen, broker.DefaultAddr; got != want {
		t.Errorf("brokers.<name>.listen: %v, but broker.DefaultAddr is %v", got, want)
	}
}

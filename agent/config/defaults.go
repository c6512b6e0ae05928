package config

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"
)

// applyDefaults fills in what the file left out: a field still zero takes
// the value its `default` tag gives (setDefaults); but an embedded
// broker's max_inflight is EmbeddedMaxInflight, an embedded broker has
// limits even if the file says none, and remote.retained is
// checkpoints.retained.
func (c *Config) applyDefaults() {
	for _, b := range c.Brokers {
		if b.Embedded && b.MaxInflight == 0 {
			b.MaxInflight = EmbeddedMaxInflight
		}
		if b.Embedded && b.Limits == nil {
			b.Limits = &BrokerLimits{}
		}
	}
	setDefaults(reflect.ValueOf(c).Elem())
	if c.Remote != nil && c.Remote.Retained == 0 {
		c.Remote.Retained = c.Checkpoints.Retained
	}
}

// setDefaults gives each field of v, and of what v holds, that is still
// zero the value of its `default` tag, read as the file's text would be;
// a tag `defaultif:"F"` beside it restricts that to when the bool field
// F of the struct is true. v is a struct (addressable) or a pointer to,
// a list or a mapping of them; a section the file left out (a nil
// pointer) stays out.
func setDefaults(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			setDefaults(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			setDefaults(v.Index(i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			setDefaults(it.Value())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue // Config's positions and the like
			}
			def, ok := f.Tag.Lookup("default")
			if !ok {
				setDefaults(fv)
				continue
			}
			if only := f.Tag.Get("defaultif"); fv.IsZero() && (only == "" || v.FieldByName(only).Bool()) {
				d := &decoder{lookup: func(string) (string, bool) { return "", false }}
				d.decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}, fv)
				if len(d.errs) > 0 {
					panic(fmt.Sprintf("config: the default of %s.%s: %v", t.Name(), f.Name, d.errs))
				}
			}
		}
	}
}

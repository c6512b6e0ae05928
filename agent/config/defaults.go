package config

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// applyDefaults fills in what the file left out: a field it does not
// give (or gives as null) takes the value its `default` tag gives
// (setDefaults); but an embedded broker has limits even if the file
// gives none, and remote.retained is checkpoints.retained. A value the
// file writes is the value that runs, a zero too: the validator refuses
// one that cannot, saying what to write instead.
func (c *Config) applyDefaults() {
	for _, b := range c.Brokers {
		if b.Embedded && b.Limits == nil {
			b.Limits = &BrokerLimits{}
		}
	}
	written := func(field any) bool {
		_, ok := c.pos[field]
		_, failed := c.pos[undecoded{field}] // it has its error, and takes the default
		return ok && !failed
	}
	setDefaults(reflect.ValueOf(c).Elem(), written)
	if c.Remote != nil && !written(&c.Remote.Retained) {
		c.Remote.Retained = c.Checkpoints.Retained
	}
}

// setDefaults gives each field of v, and of what v holds, that the file
// did not write (written, by the field's address; a field of a struct
// that is no value of its own, a mapping's, is written if not zero) the
// value of its `default` tag, read as the file's text would be; a tag
// `defaultif:"F"` beside it restricts that to when the bool field F of
// the struct is true. v is a struct (addressable) or a pointer to, a list
// or a mapping of them; a section the file left out (a nil pointer) stays
// out.
func setDefaults(v reflect.Value, written func(field any) bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			setDefaults(v.Elem(), written)
		}
	case reflect.Slice:
		for i := range v.Len() {
			setDefaults(v.Index(i), written)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			setDefaults(it.Value(), written)
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
				setDefaults(fv, written)
				continue
			}
			given := !fv.IsZero()
			if fv.CanAddr() {
				given = written(fv.Addr().Interface())
			}
			if only := f.Tag.Get("defaultif"); !given && (only == "" || v.FieldByName(only).Bool()) {
				d := &decoder{lookup: func(string) (string, bool) { return "", false }}
				d.decode(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: def}, fv)
				if len(d.errs) > 0 {
					panic(fmt.Sprintf("config: the default of %s.%s: %v", t.Name(), f.Name, d.errs))
				}
			}
		}
	}
}

package config

import (
	"fmt"
	"reflect"
	"strconv"
)

// An error never shows a value that took something from the environment
// (${VAR}): such a value is often a secret (password: ${MQTT_PASSWORD},
// secret_key: ${S3_SECRET}), and errors go to the log (a reload refused),
// to `cairn status`, its JSON and `cairn top`. It shows the value as the
// file writes it instead, said to come from the environment:
//
//	x.yaml:2:3: log_level: "${LOG_LEVEL}" (from the environment) is not one of debug, info, warn, error
//
// The decoder notes the file's text of every such value (fromEnv), and
// every error about a value shows it through show; an error that would
// show a part of it, or another package's error about it, which may quote
// it, asks fromEnv or goes through reason.

// fromEnv holds the file's text of the values that took something from
// the environment, by field address and entry, as positions.
type fromEnv map[any]string

// written is how an error shows a scalar as the file gives it: quoted, and
// said to be from the environment if it refers to a variable, whose value
// it does not show.
func written(text string) string {
	if envRef.MatchString(text) {
		return fmt.Sprintf("%q (from the environment)", text)
	}
	return fmt.Sprintf("%q", text)
}

// show returns the value of the field at address field (or of an entry of
// it) for an error message: as format gives it, or as the file writes it
// if it took something from the environment.
func (c *Config) show(field any) string {
	if text, ok := c.env[field]; ok {
		return written(text)
	}
	return format(field)
}

// AsWritten returns the string at address field, a field of c, as the
// file writes it, before ${VAR} substitution: what the agent shows at run
// time (in reasons it stores, publishes and serves) instead of what the
// environment gave, as errors do.
func (c *Config) AsWritten(field *string) string { return c.asWritten(field, *field) }

// asWritten is AsWritten of value, the string at address field or of an
// entry of it.
func (c *Config) asWritten(field any, value string) string {
	if text, ok := c.env[field]; ok {
		return text
	}
	return value
}

// fromEnv reports whether the value of the field at address field (or of
// an entry of it) took something from the environment.
func (c *Config) fromEnv(field any) bool {
	_, ok := c.env[field]
	return ok
}

// reason returns err, which another package gave about the value of the
// field at address field, for an error message; but if the value took
// something from the environment, safe with the value shown (show) for
// its %s: err may quote the value, or a part of it.
func (c *Config) reason(field any, err error, safe string) string {
	if c.fromEnv(field) {
		return fmt.Sprintf(safe, c.show(field))
	}
	return err.Error()
}

// format returns the value of the field at address field (or of an entry
// of it) as an error shows it: a string quoted, anything else as fmt
// prints it.
func format(field any) string {
	var v reflect.Value
	switch f := field.(type) {
	case entry:
		v = reflect.ValueOf(f.field).Elem()
		if v.Kind() == reflect.Map {
			v = v.MapIndex(reflect.ValueOf(f.key))
		} else {
			v = v.Index(f.key.(int))
		}
	default:
		v = reflect.ValueOf(field).Elem()
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "none"
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.String {
		return strconv.Quote(v.String())
	}
	return fmt.Sprint(v.Interface())
}

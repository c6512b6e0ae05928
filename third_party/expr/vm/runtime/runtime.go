package runtime

//go:generate sh -c "go run ./helpers > ./helpers[generated].go"

import (
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/expr-lang/expr/internal/deref"
)

var fieldCache sync.Map

type fieldCacheKey struct {
	t reflect.Type
	f string
}

func Fetch(from, i any) any {
	v := reflect.ValueOf(from)
	if v.Kind() == reflect.Invalid {
		panic(fmt.Sprintf("cannot fetch %v from %T", i, from))
	}

	// cairn: Go methods are not looked up (see third_party/README.md).

	// Structs, maps, and slices can be access through a pointer or through
	// a value, when they are accessed through a pointer we don't want to
	// copy them to a value.
	// De-reference everything if necessary (interface and pointers)
	v = deref.Value(v)

	switch v.Kind() {
	case reflect.Array, reflect.Slice, reflect.String:
		// cairn: integers are int64 on every platform (see third_party/README.md):
		// an index int cannot hold is out of range, not wrapped into it.
		index, l := ToInt64(i), int64(v.Len())
		if index < 0 {
			index = l + index
		}
		if index < 0 || index >= l {
			panic(fmt.Sprintf("index out of range: %v (array length is %v)", index, l))
		}
		value := v.Index(int(index))
		if value.IsValid() {
			return value.Interface()
		}

	case reflect.Map:
		value := MapIndex(v, i) // cairn: integers are int64 on every platform (see third_party/README.md).
		if value.IsValid() {
			return value.Interface()
		} else {
			elem := reflect.TypeOf(from).Elem()
			return reflect.Zero(elem).Interface()
		}

	case reflect.Struct:
		fieldName := i.(string)
		t := v.Type()
		key := fieldCacheKey{
			t: t,
			f: fieldName,
		}
		if cv, ok := fieldCache.Load(key); ok {
			return v.FieldByIndex(cv.([]int)).Interface()
		}
		field, ok := t.FieldByNameFunc(func(name string) bool {
			field, _ := t.FieldByName(name)
			switch field.Tag.Get("expr") {
			case "-":
				return false
			case fieldName:
				return true
			default:
				return name == fieldName
			}
		})
		if ok {
			value := v.FieldByIndex(field.Index)
			if value.IsValid() {
				fieldCache.Store(key, field.Index)
				return value.Interface()
			}
		}
	}
	panic(fmt.Sprintf("cannot fetch %v from %T", i, from))
}

type Field struct {
	Index []int
	Path  []string
}

func FetchField(from any, field *Field) any {
	v := reflect.ValueOf(from)
	if v.Kind() != reflect.Invalid {
		v = reflect.Indirect(v)

		// We can use v.FieldByIndex here, but it will panic if the field
		// is not exists. And we need to recover() to generate a more
		// user-friendly error message.
		// Also, our fieldByIndex() function is slightly faster than the
		// v.FieldByIndex() function as we don't need to verify what a field
		// is a struct as we already did it on compilation step.
		value := fieldByIndex(v, field)
		if value.IsValid() {
			return value.Interface()
		}
	}
	panic(fmt.Sprintf("cannot get %v from %T", field.Path[0], from))
}

func fieldByIndex(v reflect.Value, field *Field) reflect.Value {
	if len(field.Index) == 1 {
		return v.Field(field.Index[0])
	}
	for i, x := range field.Index {
		if i > 0 {
			if v.Kind() == reflect.Ptr {
				if v.IsNil() {
					panic(fmt.Sprintf("cannot get %v from %v", field.Path[i], field.Path[i-1]))
				}
				v = v.Elem()
			}
		}
		v = v.Field(x)
	}
	return v
}

type Method struct {
	Index int
	Name  string
}

func FetchMethod(from any, method *Method) any {
	// cairn: Go methods are not looked up (see third_party/README.md).
	panic(fmt.Sprintf("cannot fetch %v from %T", method.Name, from))
}

func Slice(array, from, to any) any {
	v := reflect.ValueOf(array)

	switch v.Kind() {
	case reflect.Array, reflect.Slice, reflect.String:
		// cairn: integers are int64 on every platform (see third_party/README.md):
		// bounds int cannot hold are clamped, not wrapped.
		length := int64(v.Len())
		a, b := ToInt64(from), ToInt64(to)
		if a < 0 {
			a = length + a
		}
		if a < 0 {
			a = 0
		}
		if b < 0 {
			b = length + b
		}
		if b < 0 {
			b = 0
		}
		if b > length {
			b = length
		}
		if a > b {
			a = b
		}
		if v.Kind() == reflect.Array && !v.CanAddr() {
			newValue := reflect.New(v.Type()).Elem()
			newValue.Set(v)
			v = newValue
		}
		value := v.Slice(int(a), int(b))
		if value.IsValid() {
			return value.Interface()
		}

	case reflect.Ptr:
		value := v.Elem()
		if value.IsValid() {
			return Slice(value.Interface(), from, to)
		}

	}
	panic(fmt.Sprintf("cannot slice %v", from))
}

func In(needle any, array any) bool {
	if array == nil {
		return false
	}
	v := reflect.ValueOf(array)

	switch v.Kind() {

	case reflect.Array, reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			value := v.Index(i)
			if value.IsValid() {
				if Equal(value.Interface(), needle) {
					return true
				}
			}
		}
		return false

	case reflect.Map:
		value := MapIndex(v, needle) // cairn: integers are int64 on every platform (see third_party/README.md).
		if value.IsValid() {
			return true
		}
		return false

	case reflect.Struct:
		n := reflect.ValueOf(needle)
		if !n.IsValid() || n.Kind() != reflect.String {
			panic(fmt.Sprintf("cannot use %T as field name of %T", needle, array))
		}
		field, ok := v.Type().FieldByName(n.String())
		if !ok || !field.IsExported() || field.Tag.Get("expr") == "-" {
			return false
		}
		value := v.FieldByIndex(field.Index)
		if value.IsValid() {
			return true
		}
		return false

	case reflect.Ptr:
		value := v.Elem()
		if value.IsValid() {
			return In(needle, value.Interface())
		}
		return false
	}

	panic(fmt.Sprintf(`operator "in" not defined on %T`, array))
}

// MapIndex is m[key], or the zero Value where m has no such key; a nil key
// is m's key type's zero. cairn: integers are int64 on every platform (see
// third_party/README.md): an integer key of another integer type than m's
// keys is converted (IntegerAs), and is not there where that type cannot
// hold it.
func MapIndex(m reflect.Value, key any) reflect.Value {
	t := m.Type().Key()
	if key == nil {
		return m.MapIndex(reflect.Zero(t))
	}
	k, ok := IntegerAs(reflect.ValueOf(key), t)
	if !ok {
		return reflect.Value{}
	}
	return m.MapIndex(k)
}

// IntegerAs is v as type t where both are integers of different types, and
// ok whether t holds v's value; v and true where they are not. cairn: integers
// are int64 on every platform (see third_party/README.md), and one is
// converted where Go wants another integer type: a map's key, a parameter.
func IntegerAs(v reflect.Value, t reflect.Type) (_ reflect.Value, ok bool) {
	if v.Type() == t || !isInteger(v.Kind()) || !isInteger(t.Kind()) {
		return v, true
	}
	c := v.Convert(t)
	return c, c.Convert(v.Type()).Interface() == v.Interface() && (c.CanInt() && c.Int() < 0) == (v.CanInt() && v.Int() < 0)
}

func isInteger(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uint64
}

func Len(a any) int {
	v := reflect.ValueOf(a)
	switch v.Kind() {
	case reflect.Array, reflect.Slice, reflect.Map, reflect.String:
		return v.Len()
	default:
		panic(fmt.Sprintf("invalid argument for len (type %T)", a))
	}
}

func Negate(i any) any {
	switch v := i.(type) {
	case float32:
		return -v
	case float64:
		return -v
	case int:
		return -v
	case int8:
		return -v
	case int16:
		return -v
	case int32:
		return -v
	case int64:
		return -v
	case uint:
		return -v
	case uint8:
		return -v
	case uint16:
		return -v
	case uint32:
		return -v
	case uint64:
		return -v
	default:
		panic(fmt.Sprintf("invalid operation: - %T", v))
	}
}

func Exponent(a, b any) float64 {
	return math.Pow(ToFloat64(a), ToFloat64(b))
}

// MakeRange is min..max. cairn: integers are int64 on every platform (see
// third_party/README.md).
func MakeRange(min, max int64) []int64 {
	size := max - min + 1
	if size <= 0 {
		return []int64{}
	}
	rng := make([]int64, size)
	for i := range rng {
		rng[i] = min + int64(i)
	}
	return rng
}

// ToInt is a number as an int. cairn: integers are int64 on every platform
// (see third_party/README.md): it panics for a number int cannot hold (over
// 2^31-1 where int has 32 bits) rather than wrap it.
func ToInt(a any) int {
	switch a.(type) {
	case float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
	default:
		panic(fmt.Sprintf("invalid operation: int(%T)", a))
	}
	i := ToInt64(a)
	if int64(int(i)) != i {
		panic(fmt.Sprintf("invalid operation: int(%v) overflows int", a))
	}
	return int(i)
}

// ToInt64 is a number as an int64, a float truncated toward zero.
// cairn: integers are int64 on every platform (see third_party/README.md): it
// panics for a float int64 cannot hold, NaN among them, whose conversion Go
// leaves to the platform (amd64 gives -2^63 where arm64 saturates).
func ToInt64(a any) int64 {
	switch x := a.(type) {
	case float32:
		return floatToInt64(float64(x))
	case float64:
		return floatToInt64(x)
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case int64:
		return x
	case uint:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return int64(x)
	default:
		panic(fmt.Sprintf("invalid operation: int64(%T)", x))
	}
}

func floatToInt64(x float64) int64 {
	if !(x >= -1<<63 && x < 1<<63) {
		panic(fmt.Sprintf("invalid operation: int(%v) overflows int64", x))
	}
	return int64(x)
}

func ToFloat64(a any) float64 {
	switch x := a.(type) {
	case float32:
		return float64(x)
	case float64:
		return x
	case int:
		return float64(x)
	case int8:
		return float64(x)
	case int16:
		return float64(x)
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case uint:
		return float64(x)
	case uint8:
		return float64(x)
	case uint16:
		return float64(x)
	case uint32:
		return float64(x)
	case uint64:
		return float64(x)
	default:
		panic(fmt.Sprintf("invalid operation: float(%T)", x))
	}
}

func ToBool(a any) bool {
	if a == nil {
		return false
	}
	switch x := a.(type) {
	case bool:
		return x
	default:
		panic(fmt.Sprintf("invalid operation: bool(%T)", x))
	}
}

func IsNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Chan, reflect.Func, reflect.Map, reflect.Ptr, reflect.Interface, reflect.Slice:
		return r.IsNil()
	default:
		return false
	}
}

package optimizer

import (
	"reflect"

	. "github.com/expr-lang/expr/ast"
)

type inArray struct{}

func (*inArray) Visit(node *Node) {
	switch n := (*node).(type) {
	case *BinaryNode:
		if n.Operator == "in" {
			if array, ok := n.Right.(*ArrayNode); ok {
				if len(array.Nodes) > 0 {
					t := n.Left.Type()
					// cairn: integers are int64 on every platform (see third_party/README.md):
					// the set's keys are int64, and runtime.MapIndex converts a signed
					// integer to them exactly, as runtime.Equal compares it.
					if t == nil || t.Kind() < reflect.Int || t.Kind() > reflect.Int64 {
						// This optimization can be only performed if left side is int type,
						// as runtime.in func uses reflect.Map.MapIndex and keys of map must,
						// be same as checked value type.
						goto string
					}

					for _, a := range array.Nodes {
						if _, ok := a.(*IntegerNode); !ok {
							goto string
						}
					}
					{
						value := make(map[int64]struct{})
						for _, a := range array.Nodes {
							value[a.(*IntegerNode).Value] = struct{}{}
						}
						m := &ConstantNode{Value: value}
						m.SetType(reflect.TypeOf(value))
						patchCopyType(node, &BinaryNode{
							Operator: n.Operator,
							Left:     n.Left,
							Right:    m,
						})
					}

				string:
					for _, a := range array.Nodes {
						if _, ok := a.(*StringNode); !ok {
							return
						}
					}
					{
						value := make(map[string]struct{})
						for _, a := range array.Nodes {
							value[a.(*StringNode).Value] = struct{}{}
						}
						m := &ConstantNode{Value: value}
						m.SetType(reflect.TypeOf(value))
						patchCopyType(node, &BinaryNode{
							Operator: n.Operator,
							Left:     n.Left,
							Right:    m,
						})
					}

				}
			}
		}
	}
}

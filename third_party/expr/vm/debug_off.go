//go:build !expr_debug
// +build !expr_debug

package vm

const debug = false

// Package pickle decodes Python pickle streams (protocols 0-5) into compact
// tagged values without ever executing or resolving Python objects.
package pickle

import (
	"math"
	"math/big"
)

// Kind is the type tag of a Value.
type Kind uint8

// Value kinds. Containers (List, Tuple, Dict, Set, FrozenSet, Object) live in
// the Decoder's container table; Value.X names them by id and generation.
const (
	None Kind = iota
	Bool
	Int    // X is the int64 bits
	BigInt // X indexes the decoder's big-int table
	Float  // X is the float64 bits
	String // X indexes the decoder's interned string table
	Bytes  // X indexes the decoder's bytes table
	Global // X is the string id of "module.name"
	List   // container
	Tuple  // container
	Dict   // container: items are key, value pairs
	Set    // container
	FrozenSet
	Object // container: an inert REDUCE/NEWOBJ/INST/OBJ/PERSID result
	Handle // X is a caller-defined payload set by a Finisher
	mark   // internal: MARK on the stack
)

var kindNames = [...]string{"None", "bool", "int", "int", "float", "str", "bytes", "global",
	"list", "tuple", "dict", "set", "frozenset", "object", "handle", "mark"}

// String names the kind in Python's terms.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "?"
}

// Value is one decoded value: 16 bytes, no pointers.
type Value struct {
	Kind Kind
	// Sub is a caller-defined sub-tag for Handle values.
	Sub uint8
	X   uint64
}

// IsContainer reports whether v refers to the container table.
func (v Value) IsContainer() bool { return v.Kind >= List && v.Kind <= Object }

// Int returns the value of an Int (ok false for other kinds).
func (v Value) Int() (int64, bool) {
	if v.Kind == Int {
		return int64(v.X), true
	}
	if v.Kind == Bool {
		return int64(v.X), true
	}
	return 0, false
}

// Float returns a Float's value, or an Int converted.
func (v Value) Float() (float64, bool) {
	switch v.Kind {
	case Float:
		return math.Float64frombits(v.X), true
	case Int:
		return float64(int64(v.X)), true
	}
	return 0, false
}

// MakeHandle returns a Handle value with a caller-defined sub-tag and payload.
func MakeHandle(sub uint8, x uint64) Value { return Value{Kind: Handle, Sub: sub, X: x} }

func intValue(i int64) Value { return Value{Kind: Int, X: uint64(i)} }

// container is one mutable container. Object containers keep the class in
// cls, the REDUCE/NEWOBJ arguments in args and BUILD state in state; items
// then hold SETITEMS pairs and list holds APPENDS items.
type container struct {
	kind  Kind
	multi bool // memoized under more than one index
	// hasCont says items may hold containers (release scans them).
	hasCont bool
	gen     uint32 // bumped when the slot is recycled
	memo    int64  // last memo index holding it, -1 if none
	// pending marks a container a Finisher replaced by repl; its slot is
	// recycled at the next flush, after stale stack copies are rewritten.
	pending bool
	repl    Value
	items   []Value
	list    []Value
	cls     Value
	args    Value
	state   Value
}

func (d *Decoder) bigInt(v Value) *big.Int {
	if v.Kind == BigInt && v.X < uint64(len(d.bigs)) {
		return d.bigs[v.X]
	}
	return nil
}

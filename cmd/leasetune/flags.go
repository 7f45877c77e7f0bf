package main

import (
	"errors"
	"strconv"
)

// errTwice is returned when a flag is given more than once: for a
// validation tool, silently taking the last of two values is a trap.
var errTwice = errors.New("given more than once")

// onceString is a string flag that may be given once.
type onceString struct {
	value string
	set   bool
}

func (f *onceString) String() string { return f.value }
func (f *onceString) Type() string   { return "duration" }
func (f *onceString) Set(s string) error {
	if f.set {
		return errTwice
	}
	f.value, f.set = s, true
	return nil
}

// decimalInt is an int flag read in base 10 only ("010" is ten, not
// eight; pflag's IntVar would read it as octal), given at most once.
type decimalInt struct {
	value int
	set   bool
}

func (f *decimalInt) String() string { return strconv.Itoa(f.value) }
func (f *decimalInt) Type() string   { return "int" }
func (f *decimalInt) Set(s string) error {
	if f.set {
		return errTwice
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a decimal number")
	}
	f.value, f.set = n, true
	return nil
}

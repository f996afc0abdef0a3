// Package testpanic is the tests' panic catcher: Message runs a function
// and returns what it panicked with, so a test can assert a clear panic
// (a zero value, a NaN argument) by its text. Tests only.
package testpanic

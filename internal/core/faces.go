package core

// Faces. Packages sketch and rotator are thin faces that hold the engine
// by value (Sketch, Rotator) and forward to it. A package that is handed
// a face and needs the engine under it (grudge's ticker-driven rotation,
// snapshot's size check, the test seams) asks here: each face package
// registers its unwrapper in an init function, which has run before any
// code can hold one of its values.
var (
	sketchOf  func(face any) *Sketch
	rotatorOf func(face any) *Rotator
)

// RegisterSketchFace installs package sketch's unwrapper.
func RegisterSketchFace(f func(face any) *Sketch) { sketchOf = f }

// RegisterRotatorFace installs package rotator's unwrapper.
func RegisterRotatorFace(f func(face any) *Rotator) { rotatorOf = f }

// SketchOf returns the engine under a *sketch.Sketch, or nil if face is
// not one (or package sketch is not linked).
func SketchOf(face any) *Sketch {
	if sketchOf == nil {
		return nil
	}
	return sketchOf(face)
}

// RotatorOf returns the engine under a *rotator.Rotator, or nil if face
// is not one (or package rotator is not linked).
func RotatorOf(face any) *Rotator {
	if rotatorOf == nil {
		return nil
	}
	return rotatorOf(face)
}

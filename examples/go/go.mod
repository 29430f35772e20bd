module github.com/tptrain/tptrain/examples/go

go 1.19

require github.com/tptrain/tptrain/bindings/go v0.0.0

replace github.com/tptrain/tptrain/bindings/go => ../../bindings/go

package emit

import (
	"reflect"

	"github.com/dave/jennifer/jen"

	"github.com/worldfoundry/wfgen/gen/ir"

	"github.com/worldfoundry/wfgen/runtime/spec"
	"github.com/worldfoundry/wfgen/runtime/tensor"
)

// typedConsts are the constants the spec literal writes instead of the
// values they stand for, by the value (its dynamic type included): field
// and artifact kinds, dtypes and checkpoint formats.
var typedConsts = map[any]jen.Code{}

// fieldConsts are the constants of plain string fields of the spec types,
// by field ("InferenceFieldSpec.Target") and value.
var fieldConsts = map[string]map[string]jen.Code{}

func init() {
	for _, k := range spec.FieldKinds {
		info, _ := k.Info()
		typedConsts[k] = jen.Qual(ir.SpecPath, info.Const)
	}
	for _, k := range spec.ArtifactKinds {
		info, _ := k.Info()
		typedConsts[k] = jen.Qual(ir.SpecPath, info.Const)
	}
	for name, v := range map[string]spec.CheckpointFormat{
		"FormatTorchScript": spec.FormatTorchScript, "FormatAOTInductor": spec.FormatAOTInductor,
	} {
		typedConsts[v] = jen.Qual(ir.SpecPath, name)
	}
	for name, v := range map[string]tensor.DType{
		"Float32": tensor.Float32, "Float16": tensor.Float16, "BFloat16": tensor.BFloat16,
		"Int64": tensor.Int64, "Int32": tensor.Int32, "Uint8": tensor.Uint8, "Bool": tensor.Bool,
	} {
		typedConsts[v] = jen.Qual(ir.TensorPath, name)
	}
	for field, consts := range map[string]map[string]string{
		"InferenceFieldSpec.Target": {spec.TargetCallKwargs: "TargetCallKwargs", spec.TargetLoadKwargs: "TargetLoadKwargs"},
		"ImageSpec.Layout":          {spec.LayoutHWC: "LayoutHWC", spec.LayoutCHW: "LayoutCHW"},
		"ImageSpec.Channels":        {spec.ChannelsRGB: "ChannelsRGB", spec.ChannelsBGR: "ChannelsBGR", spec.ChannelsL: "ChannelsL", spec.ChannelsRGBA: "ChannelsRGBA"},
	} {
		m := map[string]jen.Code{}
		for v, name := range consts {
			m[v] = jen.Qual(ir.SpecPath, name)
		}
		fieldConsts[field] = m
	}
}

// constant returns the constant that stands for v, a value of field (of
// struct type in, "" when v is no struct field), or nil.
func constant(v reflect.Value, in reflect.Type, field string) jen.Code {
	if !v.IsValid() || v.Kind() != reflect.String || !v.CanInterface() {
		return nil
	}
	if v.Type().PkgPath() == "" {
		if in != nil {
			return fieldConsts[in.Name()+"."+field][v.String()]
		}
		return nil
	}
	return typedConsts[v.Interface()]
}

package analysis

// Category is one of PyTorch's memory categories, those torch.profiler's
// memory timeline uses, plus Unknown.
type Category uint8

// The categories, in the order outputs list them.
const (
	Unknown Category = iota
	Parameter
	OptimizerState
	Gradient
	Activation
	Temporary
	Input
	AutogradDetail
	numCategories
)

var categoryNames = [numCategories]string{
	Unknown:        "unknown",
	Parameter:      "parameter",
	OptimizerState: "optimizer_state",
	Gradient:       "gradient",
	Activation:     "activation",
	Temporary:      "temporary",
	Input:          "input",
	AutogradDetail: "autograd_detail",
}

// String returns the category's name as torch.profiler spells it.
func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return "unknown"
}

// Categories lists every category in output order (Unknown last).
func Categories() []Category {
	return []Category{Parameter, OptimizerState, Gradient, Activation, Temporary, Input, AutogradDetail, Unknown}
}

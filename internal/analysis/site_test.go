package analysis

import "testing"

func TestSiteString(t *testing.T) {
	for _, tt := range []struct {
		frames []string
		want   string
	}{
		{nil, "(no stack recorded)"},
		{[]string{"/workspace/train.py:141:log_metrics", "/workspace/train.py:158:train_step"}, "log_metrics (train.py:141) < train_step (train.py:158)"},
		{[]string{`C:\work\train.py:7:main`}, "main (train.py:7)"},
		{[]string{"??:0:torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"}, "BmmBackward0::apply"},
		{[]string{":0:torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"}, "torch::autograd::Node::operator()"},
		{[]string{"/src/c10/cuda/CUDACachingAllocator.cpp:0:c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"},
			"DeviceCachingAllocator::malloc (CUDACachingAllocator.cpp)"},
		{[]string{"x.cpp:12:at::Tensor at::native::empty<float, int>(long) const"}, "at::native::empty<float, int> (x.cpp:12)"},
		{[]string{"not a frame"}, "not a frame"},
	} {
		if got := SiteString(tt.frames); got != tt.want {
			t.Errorf("SiteString(%q) = %q, want %q", tt.frames, got, tt.want)
		}
	}
}

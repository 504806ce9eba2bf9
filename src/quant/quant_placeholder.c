/* placeholder: replaced by the quantization kernels */
typedef int quant_placeholder_t;

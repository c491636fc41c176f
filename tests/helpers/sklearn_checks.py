"""Shared settings for sklearn's check_estimator on rfstream's float32 feature maps."""

# With float32 output, OpenBLAS may pick a different GEMM kernel for another number of
# rows, so a row's features can differ by 1 ulp (~4e-7 relative, seen about once in 8
# runs under load) when it is transformed in another batch.  These two checks compare at
# rtol 1e-7; the float64 configurations run them, and each map's chunk-invariance test
# bounds the float32 differences.
FLOAT32_ROW_GROUPING = {
    name: "float32 GEMM rounding depends on the batch size (1 ulp); checked at rtol 1e-7"
    for name in ("check_methods_sample_order_invariance", "check_methods_subset_invariance")
}

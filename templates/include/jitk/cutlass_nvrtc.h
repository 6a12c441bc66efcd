// jitk/cutlass_nvrtc.h - what CUTLASS 4.x needs to compile under NVRTC,
// included before any CUTLASS header (the `jitk` header package,
// specs/packages.yaml). Nothing here is used under nvcc.
#pragma once

#if defined(__CUDACC_RTC__)
// CUTLASS takes unsigned __int128 only where the compiler says x86-64 and
// GCC, which NVRTC does not (nvcc's device pass does): without it its
// 128-bit division (FastDivmodU64, the tile scheduler's parameters) is a
// breakpoint on the device, and uint128_t has another alignment than the
// host's. --device-int128 gives NVRTC the type.
#define CUTLASS_UINT128_NATIVE
#endif

#include <cuda/std/type_traits>
#include <cute/container/tuple.hpp>

#if defined(__CUDACC_RTC__)
// CUTLASS spells these with std:: in a few places; NVRTC has no libstdc++.
namespace std {
using cuda::std::is_const_v;
using cuda::std::is_pointer_v;
using cuda::std::void_t;
} // namespace std
// CuTe declares std::tuple_size / tuple_element for its tuples under
// NVRTC, but not for const tuples, so `auto const& [a, b, c] = t;` (the
// row broadcast's stride) falls back to binding data members and fails.
namespace std {
template <class... T>
struct tuple_size<const cute::tuple<T...>> : cuda::std::integral_constant<size_t, sizeof...(T)> {};
template <size_t I, class... T> struct tuple_element<I, const cute::tuple<T...>> {
	using type = const typename cuda::std::tuple_element<I, cuda::std::tuple<T...>>::type;
};
} // namespace std
#endif

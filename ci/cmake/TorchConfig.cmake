# find_package(Torch) for building vLLM's CPU extension against PyPI's torch wheel.
#
# The wheel's own config (torch/share/cmake/Caffe2) requires a CUDA toolkit
# because PyPI ships the CUDA build of torch 2.6.0. The CPU extension only
# needs headers, libtorch/libtorch_cpu/libc10 and the C++ ABI flag, so this
# config describes exactly that. setup.py selects it through Torch_DIR.
# VLLM_PYTHON_EXECUTABLE is set by vLLM's setup.py; fall back to PATH.
if(VLLM_PYTHON_EXECUTABLE)
  set(_pstack_python "${VLLM_PYTHON_EXECUTABLE}")
else()
  set(_pstack_python python3)
endif()
execute_process(
  COMMAND "${_pstack_python}" -c
    "import os, torch; print(os.path.dirname(torch.__file__), int(torch._C._GLIBCXX_USE_CXX11_ABI), torch.__version__.split('+')[0], sep=';', end='')"
  OUTPUT_VARIABLE _pstack_torch_info
  RESULT_VARIABLE _pstack_rc)
if(NOT _pstack_rc EQUAL 0)
  message(FATAL_ERROR "TorchConfig.cmake: `import torch` failed with ${_pstack_python}")
endif()
list(GET _pstack_torch_info 0 _pstack_torch_dir)
list(GET _pstack_torch_info 1 _pstack_cxx11_abi)
list(GET _pstack_torch_info 2 Torch_VERSION)

set(TORCH_INCLUDE_DIRS
    "${_pstack_torch_dir}/include"
    "${_pstack_torch_dir}/include/torch/csrc/api/include")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${_pstack_cxx11_abi}")

if(NOT TARGET torch)
  add_library(torch SHARED IMPORTED)
  set_target_properties(torch PROPERTIES
    IMPORTED_LOCATION "${_pstack_torch_dir}/lib/libtorch.so"
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
    INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}"
    INTERFACE_LINK_LIBRARIES
      "${_pstack_torch_dir}/lib/libtorch_cpu.so;${_pstack_torch_dir}/lib/libc10.so")
endif()
set(TORCH_LIBRARIES torch)
set(Torch_FOUND TRUE)

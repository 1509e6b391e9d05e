"""A stand-in ``vulkan/vulkan_core.h`` for building ``gpu_frames.c`` without the Vulkan headers.

``VSVulkan4.h`` (VapourSynth R80+) includes ``<vulkan/vulkan_core.h>``, which neither the
vapoursynth wheel nor most build machines ship. The stand-in declares what the header names:
its handle and scalar types, and one ``PFN_vk*`` per entry of its ``VS_VK_FUNCTION_LIST``
(read from the header itself, so it follows the header). Every ``PFN_vk*`` is a plain function
pointer, so the ``VSVULKANAPI`` table keeps its layout; the bridge calls no Vulkan function.

``setup.py`` loads this file by its path (importing the package would start VapourSynth) and
writes the stand-in into the build folder; ``scripts/bench/_gpu_frames_build.py`` uses it for
the probe's plugin. Standard library only.
"""

from __future__ import annotations

import re

__all__ = ["vulkan_entry_points", "vulkan_stand_in"]

#: Types VSVulkan4.h takes by pointer only: declared, never defined.
STRUCTS = {"VkMemoryRequirements"}
SCALARS = {"VkDeviceSize": "uint64_t", "VkDeviceAddress": "uint64_t", "VkBool32": "uint32_t"}
#: Vulkan 1.4's handles (and debug utils'), pointers on 64-bit targets. A name the header uses
#: that is none of these kinds (an enum or a struct taken by value) has a size the stand-in
#: cannot know, so it is refused rather than guessed: a guess would move every field after it.
HANDLES = {
    "VkInstance", "VkPhysicalDevice", "VkDevice", "VkQueue", "VkCommandBuffer", "VkBuffer",
    "VkImage", "VkSemaphore", "VkFence", "VkDeviceMemory", "VkEvent", "VkQueryPool",
    "VkBufferView", "VkImageView", "VkShaderModule", "VkPipelineCache", "VkPipelineLayout",
    "VkPipeline", "VkRenderPass", "VkDescriptorSetLayout", "VkSampler", "VkDescriptorSet",
    "VkDescriptorPool", "VkFramebuffer", "VkCommandPool", "VkSamplerYcbcrConversion",
    "VkDescriptorUpdateTemplate", "VkPrivateDataSlot", "VkDebugUtilsMessengerEXT",
}  # fmt: skip


def _without_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)


def vulkan_entry_points(header: str) -> list[str]:
    """The names of VS_VK_FUNCTION_LIST's entries, in order (``CreateInstance``, ...)."""
    return re.findall(r"FN\(\s*VS_VK_\w+\s*,\s*VS_VK_\w+\s*,\s*(\w+)\s*\)", header)


def _type_line(name: str) -> str:
    if name in SCALARS:
        return f"typedef {SCALARS[name]} {name};"
    if name.endswith("Flags2"):
        return f"typedef uint64_t {name};"
    if name.endswith("Flags") or name.endswith("FlagBits"):
        return f"typedef uint32_t {name};"
    if name in STRUCTS:
        return f"typedef struct {name} {name};"
    if name in HANDLES:
        return f"typedef struct {name}_T *{name};"
    raise ValueError(f"vulkan_stand_in: {name} is no Vulkan type the stand-in knows the size of")


def vulkan_stand_in(header: str) -> str:
    """A vulkan_core.h with what `header` (VSVulkan4.h's text) needs of it.

    Raises
    ------
    ValueError
        When `header` names a Vulkan type of a size the stand-in does not know (see
        :data:`HANDLES`).
    """
    code = _without_comments(header)
    names = sorted(set(re.findall(r"\bVk[A-Z]\w*", code)) - {"VkResult"})
    lines = [
        "/* Written by avdenoise_vs/_native/vulkan_stand_in.py: the part of vulkan_core.h that",
        "   VSVulkan4.h needs, for a build without the Vulkan headers. */",
        "#ifndef VULKAN_CORE_H_",
        "#define VULKAN_CORE_H_ 1",
        "#include <stdint.h>",
        "#define VK_UUID_SIZE 16U",
        "#define VK_LUID_SIZE 8U",
        "#define VK_MAKE_API_VERSION(variant, major, minor, patch) \\",
        "    ((((uint32_t)(variant)) << 29U) | (((uint32_t)(major)) << 22U) | \\",
        "     (((uint32_t)(minor)) << 12U) | ((uint32_t)(patch)))",
        "#define VK_API_VERSION_1_4 VK_MAKE_API_VERSION(0, 1, 4, 0)",
        "typedef int VkResult;",
        "typedef void (*PFN_vkVoidFunction)(void);",
        *(_type_line(name) for name in names),
        "typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);",
    ]
    for name in vulkan_entry_points(header):
        if name != "GetInstanceProcAddr":
            lines.append(f"typedef void (*PFN_vk{name})(void);")
    lines.append("#endif")
    return "\n".join(lines) + "\n"

// cpuid_cap: an LD_PRELOAD library that makes this process (and the processes it starts) see a narrower x86 CPU.
//
// Why: most users' CPUs are AVX2-only, and the machines that run our tests and benchmarks often have AVX-512.
// SUPERPOINT_RT_ISA caps our own dispatch and ONEDNN_MAX_CPU_ISA caps oneDNN's, but neither reaches the feature
// detection itself, nor the peers that a benchmark compares against (ONNX Runtime's MLAS, OpenVINO, ncnn, MNN, numpy
// and torch read CPUID and take no cap). This library asks the kernel to make the CPUID instruction fault
// (arch_prctl(ARCH_SET_CPUID, 0), "CPUID faulting", Intel since Ivy Bridge and KVM guests), answers each trapped
// CPUID with the real answer minus the features of the chosen cap, and resumes after the instruction. Every
// library in the process then detects the capped CPU by its own code path, as it would on that CPU.
//
// Limits, said so that no one reads more into a capped run than it is: the instructions still run on this CPU
// (timings are this core's at the capped ISA, not another vendor's microarchitecture); XGETBV still reports the
// AVX-512 register state (every detector we know checks the CPUID bit first, as the x86 manuals say to); code that
// ran CPUID before this library's constructor (glibc's own ifunc selection) keeps what it saw.
//
// Use: scripts/as-cpu.sh avx2|avx2-novnni COMMAND..., which sets SPRT_CPUID_CAP and names this library in both
// LD_AUDIT and LD_PRELOAD (see arm() for why both).
//   avx2         AVX2 + FMA, with AVX-VNNI where this CPU has it (Intel client CPUs since Alder Lake, Zen 5);
//                no AVX-512 of any kind, no AMX.
//   avx2-novnni  the same without AVX-VNNI and the other VEX-encoded AI extensions (AMD Zen 2/3, Intel before
//                12th gen).
// When the cap is set and the kernel refuses CPUID faulting, the process stops with exit status 97 and a message:
// a run that silently saw the full CPU would be reported as a capped one.
//
// Signals: the trap arrives as SIGSEGV. Programs that install their own SIGSEGV handler (Python's faulthandler,
// which pytest enables) go through this library's sigaction()/signal(), which records their handler and keeps this
// one first; faults that are not CPUID are handed to theirs, or to the default action.
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum cap { CAP_NONE, CAP_AVX2, CAP_AVX2_NOVNNI };

static enum cap g_cap = CAP_NONE;
static struct sigaction g_user_segv;  // the program's own SIGSEGV disposition (SIG_DFL until it sets one)
static int (*g_real_sigaction)(int, const struct sigaction*, struct sigaction*);

static void say(const char* text) {
  ssize_t ignored = write(2, text, strlen(text));
  (void)ignored;
}

// CPUID with faulting lifted for this thread only (the flag is per thread and inherited by the threads it creates).
static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t out[4]) {
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1L);
  __asm__ volatile("cpuid" : "=a"(out[0]), "=b"(out[1]), "=c"(out[2]), "=d"(out[3]) : "a"(leaf), "c"(sub));
  syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0L);
}

#define BIT(n) (1u << (n))

// The bits the caps clear, by the Intel SDM's CPUID tables (vol. 2A, "CPUID"; leaf 7 and leaf 0xD).
static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
  if (leaf == 7 && sub == 0) {
    // EBX: AVX512F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31.
    r[1] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
    // ECX: AVX512_VBMI 1, AVX512_VBMI2 6, AVX512_VNNI 11, AVX512_BITALG 12, AVX512_VPOPCNTDQ 14.
    r[2] &= ~(BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14));
    // EDX: AVX512_4VNNIW 2, AVX512_4FMAPS 3, AVX512_VP2INTERSECT 8, AMX-BF16 22, AVX512_FP16 23, AMX-TILE 24,
    // AMX-INT8 25.
    r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
  } else if (leaf == 7 && sub == 1) {
    // EAX: AVX512_BF16 5, AMX-FP16 21; without VNNI also AVX-VNNI 4 and AVX-IFMA 23.
    r[0] &= ~(BIT(5) | BIT(21));
    if (g_cap == CAP_AVX2_NOVNNI) r[0] &= ~(BIT(4) | BIT(23));
    // EDX: AMX-COMPLEX 8; without VNNI also AVX-VNNI-INT8 4 and AVX-NE-CONVERT 5 (VEX, but not on the CPUs modelled).
    r[3] &= ~BIT(8);
    if (g_cap == CAP_AVX2_NOVNNI) r[3] &= ~(BIT(4) | BIT(5));
  } else if (leaf == 0xD && sub == 0) {
    // EAX: the XSAVE components this CPU supports: opmask 5, ZMM_Hi256 6, Hi16_ZMM 7, AMX 17 and 18.
    r[0] &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18));
  } else if (leaf == 0x1D || leaf == 0x1E) {
    r[0] = r[1] = r[2] = r[3] = 0;  // the AMX tile and TMUL leaves
  }
}

static void forward(int sig, siginfo_t* info, void* context) {
  if (g_user_segv.sa_flags & SA_SIGINFO) {
    if (g_user_segv.sa_sigaction) {
      g_user_segv.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_user_segv.sa_handler != SIG_DFL && g_user_segv.sa_handler != SIG_IGN) {
    g_user_segv.sa_handler(sig);
    return;
  }
  // The default action: reset and return, so that the faulting instruction runs again and the kernel kills us
  // with the signal (a core dump names the real fault).
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  g_real_sigaction(SIGSEGV, &dfl, NULL);
}

static void on_segv(int sig, siginfo_t* info, void* context) {
  ucontext_t* uc = (ucontext_t*)context;
  greg_t* g = uc->uc_mcontext.gregs;
  const unsigned char* ip = (const unsigned char*)g[REG_RIP];
  if (info->si_code == SI_KERNEL && ip[0] == 0x0F && ip[1] == 0xA2) {
    uint32_t r[4];
    const uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX];
    real_cpuid(leaf, sub, r);
    mask(leaf, sub, r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
    return;
  }
  forward(sig, info, context);
}

static void resolve_real(void) {
  if (!g_real_sigaction) {
    g_real_sigaction = (int (*)(int, const struct sigaction*, struct sigaction*))dlsym(RTLD_NEXT, "sigaction");
  }
}

// Programs see their own SIGSEGV disposition; ours stays installed underneath.
int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  resolve_real();
  if (sig != SIGSEGV || g_cap == CAP_NONE) return g_real_sigaction(sig, act, old);
  if (old) *old = g_user_segv;
  if (act) g_user_segv = *act;
  return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act, old;
  memset(&act, 0, sizeof act);
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = SA_RESTART;
  if (sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

// Arms the cap in the calling thread: once as the audit library (before any other library of the program is loaded,
// so that detectors that run in their library's constructors, such as oneDNN's, see the capped CPU) and once as the
// preloaded library (whose constructor comes after those of the program's libraries, but whose sigaction() is the
// one the program calls). The handler of the second replaces the first's; both answer the same way.
static void arm(void) {
  const char* cap = getenv("SPRT_CPUID_CAP");
  if (!cap || !*cap) return;
  if (strcmp(cap, "avx2") == 0) {
    g_cap = CAP_AVX2;
  } else if (strcmp(cap, "avx2-novnni") == 0) {
    g_cap = CAP_AVX2_NOVNNI;
  } else {
    say("cpuid_cap: SPRT_CPUID_CAP must be avx2 or avx2-novnni\n");
    _exit(97);
  }
  resolve_real();
  memset(&g_user_segv, 0, sizeof g_user_segv);
  g_user_segv.sa_handler = SIG_DFL;
  struct sigaction act;
  memset(&act, 0, sizeof act);
  act.sa_sigaction = on_segv;
  act.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&act.sa_mask);
  if (g_real_sigaction(SIGSEGV, &act, NULL) != 0 || syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0L) != 0) {
    say("cpuid_cap: this kernel or CPU refuses CPUID faulting (arch_prctl ARCH_SET_CPUID); cannot cap\n");
    _exit(97);
  }
}

__attribute__((constructor)) static void cpuid_cap_init(void) {
  arm();
}

// rtld-audit(7): the dynamic linker calls this before it loads the program's libraries.
unsigned int la_version(unsigned int version) {
  arm();
  return version;
}

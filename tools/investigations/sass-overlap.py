#!/usr/bin/env python3
# Investigation tool (docs/perf/sm90-pingpong-and-lazy-max.md): for each sm90 forward kernel in
# an sm_90a cubin, how many MUFU.EX2 lie between the steady loop's
# WARPGROUP.DEPBAR 0x1 (S waited) and the next DEPBAR 0x0 (P V waited), i.e.
# how much of the softmax runs under its own P V, and the LDL/STL count.
# Reads the ELF .text sections directly (no cuobjdump needed); decodes only
# the few opcodes it needs from the low 12 bits of each 128-bit instruction
# (checked against cuobjdump -sass output of the same cubins).
#
#   python3 tools/investigations/sass-overlap.py build/.../fwd_bf16_hd128.cubin
import struct,sys,re
def sections(path):
    d=open(path,'rb').read()
    shoff=struct.unpack_from('<Q',d,0x28)[0]; shentsize,shnum,shstrndx=struct.unpack_from('<HHH',d,0x3a)
    sh=[struct.unpack_from('<IIQQQQIIQQ',d,shoff+i*shentsize) for i in range(shnum)]
    stro=sh[shstrndx][4]
    def nm(o): e=d.index(b'\0',stro+o); return d[stro+o:e].decode()
    return {nm(s[0]):d[s[4]:s[4]+s[5]] for s in sh}
def decode(code):
    out=[]
    for i in range(0,len(code),16):
        w,w2=struct.unpack_from('<QQ',code,i)
        op=w&0xfff
        if op==0x308: out.append('EX2' if (w2>>8)&0x3f==0x08 else 'MUFU')
        elif op==0x9c5: out.append(('DEPBAR%d'%((w2>>8)&0xff)) if w>>47&1 else 'WGARRIVE')
        elif op in (0x9f0,0xdf0): out.append('HGMMA')
        elif op in (0x983,): out.append('LDL')
        elif op in (0x387,): out.append('STL')
        else: out.append('.')
    return out
for path in sys.argv[1:]:
    for name,code in sorted(sections(path).items()):
        if not name.startswith('.text.') or 'fwd_kernel' not in name: continue
        ins=decode(code)
        m=re.search(r'FwdTraitsILi(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E(\w+?)EELb(\d)ELb(\d)ELb(\d)',name)
        res=[]
        for i,x in enumerate(ins):
            if x=='DEPBAR1':
                n=0
                for y in ins[i+1:]:
                    if y=='DEPBAR0': break
                    if y=='EX2': n+=1
                res.append(n)
        tag='hd%s %sx%s st%s %s mask%s left%s cap%s'%m.groups() if m else name[:60]
        print(path.split('/')[-1], tag, 'ex2 under PV:',res, 'LDL/STL:',ins.count('LDL')+ins.count('STL'))

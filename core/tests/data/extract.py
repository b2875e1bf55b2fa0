import re,sys
# The transcripts' folder (kept outside this repository) is the first argument.
CAP=sys.argv[1].rstrip('/')+'/' if len(sys.argv)>1 else sys.exit('usage: extract.py <captures dir>')
def section(fname, num):
    txt=open(CAP+fname,encoding='utf-8').read().split('\n')
    start=[i for i,l in enumerate(txt) if l.startswith('### %d. '%num)][0]
    end=next((i for i in range(start+1,len(txt)) if txt[i].startswith('### ')),len(txt))
    return txt[start:end]
def extract(fname,num):
    sec=section(fname,num)
    head=[]; i=0
    while not sec[i].startswith('< HTTP/'): i+=1
    while sec[i] != '<':
        head.append(sec[i][2:]); i+=1
    m=sec.index('--- body framing (cat -A) ---')
    body=b''
    for l in sec[m+1:]:
        if not l.endswith('$'): break
        l=l[:-1]
        assert 'M-' not in l
        body+=l.replace('^M','\r').encode()+b'\n'
    # sanity: the plain view equals the body with CRs removed
    plain='\n'.join(sec[i+1:m]).encode()
    assert plain.startswith(body.replace(b'\r',b'')), (fname,num)
    return head, body
def chunked(body):
    # one chunk per event, as the servers flush per event
    sep = b'\r\n\r\n' if b'\r\n\r\n' in body else b'\n\n'
    parts=[p+sep for p in body.split(sep) if p]
    rest = body[sum(len(p) for p in parts):]
    assert b''.join(parts)+rest == body, "split"
    if rest: parts.append(rest)
    out=b''
    for p in parts: out+=b'%x\r\n'%len(p)+p+b'\r\n'
    return out+b'0\r\n\r\n'
for fname,num,name in [('py-stateful.txt',3,'py-initialize'),('py-stateful.txt',12,'py-progress'),
                       ('ts-stateful.txt',3,'ts-initialize'),('ts-stateful.txt',12,'ts-progress'),
                       ('rmcp-stateful.txt',3,'rmcp-initialize'),('rmcp-stateful.txt',12,'rmcp-progress')]:
    head,body=extract(fname,num)
    open(name+'.sse','wb').write(body)
    if num==3:
        hl=[h.lower() for h in head]
        if 'transfer-encoding: chunked' in hl:
            framed=chunked(body)
        else:
            # sent with content-length: the body as is
            assert 'content-length: %d'%len(body) in hl, (name, hl)
            framed=body
        raw='\r\n'.join(head).encode()+b'\r\n\r\n'+framed
        open(name+'.http','wb').write(raw)
    print(name, len(body), head[0])

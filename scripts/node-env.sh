# Sourced by bin/terravixens and bin/cdktf (`root` set): the project's Node.js 22 first on PATH — for cdktf and for
# the Node.js that jsii starts under every synth, so no end-of-life banner of an older system Node — and jsii's one
# deprecation warning (DEP0044, util.isArray) silenced, as the Makefile does. Options already in NODE_OPTIONS stay.
PATH="$root/node_modules/.bin:$PATH"
case " ${NODE_OPTIONS-} " in
  *" --disable-warning=DEP0044 "*) ;;
  *) NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--disable-warning=DEP0044" ;;
esac
JSII_NODE="$root/node_modules/.bin/node"
export PATH NODE_OPTIONS JSII_NODE

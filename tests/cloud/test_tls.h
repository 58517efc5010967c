// Self-signed certificates made at test time with the OpenSSL API, so the TLS tests need no
// files and no openssl binary.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <unistd.h>
#include <string>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/asio.h"

#include <boost/asio/ssl.hpp>

namespace hengshi::cloud::testing {

struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;
};

// A P-256 key and a certificate for `subject_alt_name` (OpenSSL syntax, e.g.
// "IP:127.0.0.1,DNS:localhost"), signed by itself and marked CA so it can be its own trust root.
inline TestCertificate make_self_signed(const std::string& subject_alt_name) {
  auto fail = [](const char* what) { throw std::runtime_error(std::string("openssl: ") + what); };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  if (!key) fail("EVP_EC_gen");
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("hengshi test"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, cert.get(), cert.get(), nullptr, nullptr, 0);
  auto add_extension = [&](int nid, const std::string& value) {
    X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str());
    if (extension == nullptr) fail("X509V3_EXT_conf_nid");
    X509_add_ext(cert.get(), extension, -1);
    X509_EXTENSION_free(extension);
  };
  add_extension(NID_basic_constraints, "critical,CA:TRUE");
  add_extension(NID_subject_alt_name, subject_alt_name);
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) fail("X509_sign");

  auto to_pem = [&](auto write) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    if (write(bio.get()) != 1) fail("PEM_write");
    char* data = nullptr;
    long size = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(size));
  };
  TestCertificate out;
  out.cert_pem = to_pem([&](BIO* bio) { return PEM_write_bio_X509(bio, cert.get()); });
  out.key_pem = to_pem([&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  return out;
}

inline std::shared_ptr<asio::ssl::context> server_tls_context(const TestCertificate& certificate) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  context->use_certificate_chain(asio::buffer(certificate.cert_pem));
  context->use_private_key(asio::buffer(certificate.key_pem), asio::ssl::context::pem);
  return context;
}

// A PEM file holding `pem`, removed when the object goes away.
class TempPemFile {
 public:
  explicit TempPemFile(const std::string& pem) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("hengshi-cloud-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
             ".pem");
    std::ofstream(path_) << pem;
  }
  ~TempPemFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace hengshi::cloud::testing
